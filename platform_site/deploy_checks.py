"""The distributed mode on the public development ``SECRET_KEY``: warned at every start.

Programs outside the platform start the distributed mode with ``DATABASE_URL`` and
``REDIS_URL`` alone (a fixed contract), so a missing ``SECRET_KEY`` cannot stop the start.
It must not pass unseen either: the default is published with the source, and whoever
reads it can forge what it keys. Every process (daphne, a worker, beat, a ``manage.py``
command) logs one WARNING when it starts (:func:`warn_at_start`, from the app's
``ready()``), and ``manage.py check`` lists it (``platform_site.W001``).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core import checks

from platform_site.env import INSECURE_SECRET_KEY

log = logging.getLogger(__name__)


def secret_key_is_public() -> bool:
    """The distributed mode runs on the development default of ``SECRET_KEY``."""
    return bool(settings.DISTRIBUTED) and settings.SECRET_KEY == INSECURE_SECRET_KEY


def secret_key_message() -> str:
    """What the public key exposes, with the settings that fall back to it today."""
    uses = [
        "admin sessions and CSRF tokens",
        "the tokens of the webhooks agents push to",
        "the ids the A2A face gives callers",
    ]
    if not settings.CREDENTIALS_KEY:
        uses.append("the encryption of agents' stored credentials (CREDENTIALS_KEY unset)")
    if settings.API_KEY_PEPPER == settings.SECRET_KEY:
        uses.append("the digests of agent keys and user tokens (API_KEY_PEPPER unset)")
    return (
        "SECRET_KEY is not set (nor SECRET_KEY_FILE): the distributed mode runs on the "
        "development default published with the source, and whoever reads it can forge "
        f"what it keys: {'; '.join(uses)}. Set SECRET_KEY_FILE (or SECRET_KEY) on every "
        "process (docs/configuration.md)"
    )


def warn_at_start() -> None:
    """One WARNING per process start when :func:`secret_key_is_public`."""
    if secret_key_is_public():
        log.warning("%s", secret_key_message())


@checks.register(checks.Tags.security)
def check_secret_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check`` (and every command that runs the checks) names it too."""
    if not secret_key_is_public():
        return []
    return [checks.Warning(secret_key_message(), id="platform_site.W001")]
