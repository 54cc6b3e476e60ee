"""Registry REST views: thin; the work is in :mod:`agent_profiles.services`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from agent_profiles import keys, ratelimit, services
from agent_profiles.api.serializers import (
    AgentProfileSerializer,
    RegistrationResultSerializer,
    RegistrationSerializer,
)
from agent_profiles.authentication import AgentPrincipal
from platform_site.clientip import client_ip


def _key_prefix(request: Request) -> str | None:
    """The prefix of the agent key the request authenticated with (None for a user token
    or no key): services check it is still live when they write."""
    if not isinstance(request.user, AgentPrincipal) or not isinstance(request.auth, str):
        return None
    return keys.parse_prefix(request.auth, "a2a")


ERROR_RESPONSE = OpenApiResponse(description='`{"error": {"code", "message", "details"}}`')


class RegistrationThrottle(ScopedRateThrottle):
    """Registration attempts per client address (``REGISTRATION_THROTTLE``, e.g. ``30/min``),
    counted in the database (:mod:`agent_profiles.ratelimit`), so every process shares
    them; DRF's own counts live in each process's cache.

    Reads the rate at request time, so a changed setting applies without a restart of
    the class (DRF's own reads it once at import).
    """

    def get_rate(self) -> str | None:
        from rest_framework.settings import api_settings

        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request: Request, view: Any) -> bool:
        self.scope = getattr(view, self.scope_attr, None)
        self.rate = self.get_rate() if self.scope else None
        if not self.scope or self.rate is None:
            return True
        limit, seconds = self.parse_rate(self.rate)
        verdict = ratelimit.hit(self.scope, client_ip(request), limit, seconds)
        self._retry_after = verdict.retry_after
        return verdict.allowed

    def wait(self) -> float | None:
        return getattr(self, "_retry_after", None)


class RegisterAgentView(APIView):
    """Register a new agent (201 + API key) or update one with its own key (200)."""

    permission_classes = [permissions.AllowAny]
    throttle_classes = [RegistrationThrottle]
    throttle_scope = "registration"

    @extend_schema(
        operation_id="register_agent",
        description=(
            "Register a new agent (201 with its API key, shown once) or, with that agent's "
            "own key as `Authorization: Bearer <apiKey>`, update it (200). No key is needed "
            "for a new agent."
        ),
        request=RegistrationSerializer,
        parameters=[
            OpenApiParameter(
                "X-Registration-Token",
                location=OpenApiParameter.HEADER,
                required=False,
                description="Needed for new agents when REGISTRATION_MODE=token.",
            )
        ],
        responses={
            201: RegistrationResultSerializer,
            200: RegistrationResultSerializer,
            400: ERROR_RESPONSE,
            401: ERROR_RESPONSE,
            403: ERROR_RESPONSE,
            409: ERROR_RESPONSE,
            413: ERROR_RESPONSE,
            429: ERROR_RESPONSE,
        },
        tags=["registry"],
    )
    def post(self, request: Request) -> Response:
        body = RegistrationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        caller = request.user.agent if isinstance(request.user, AgentPrincipal) else None
        result = services.register_agent(
            body.validated_data,
            caller_agent=caller,
            registration_token=request.headers.get("X-Registration-Token"),
            caller_key_prefix=_key_prefix(request),
        )
        payload: dict[str, Any] = {"profile": AgentProfileSerializer(result.agent).data}
        if result.api_key:
            payload["apiKey"] = result.api_key
        return Response(payload, status=status.HTTP_201_CREATED if result.created else 200)


class RefreshCardView(APIView):
    """Read the agent's card again (the agent with its own key, or an operator)."""

    @extend_schema(
        operation_id="refresh_agent_card",
        description=(
            "Read the agent's card again now and choose the interface to call it on. "
            "Authenticate with the agent's own key (`Authorization: Bearer <apiKey>`) or the "
            "token of a staff user who may change agent profiles. A served card that is not "
            "an agent card, or offers no interface the platform speaks, answers 400 and the "
            "previous card stays in use; a card that cannot be reached is recorded in the "
            "profile's `card.error`."
        ),
        request=None,
        responses={
            200: RegistrationResultSerializer,
            400: ERROR_RESPONSE,
            401: ERROR_RESPONSE,
            403: ERROR_RESPONSE,
        },
        tags=["registry"],
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = services.refresh_agent_card(
            agent_id, caller=request.user, caller_key_prefix=_key_prefix(request)
        )
        return Response({"profile": AgentProfileSerializer(agent).data})
