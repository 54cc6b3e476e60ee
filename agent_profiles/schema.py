"""OpenAPI description of the platform's Bearer authentication (drf-spectacular)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agent_profiles.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A user token (`manage.py apitoken USERNAME`, `usr_…`) or an "
            "agent's API key (`a2a_…`, from registration).",
        }
