"""Reading an agent card and choosing the interface to call the agent on (pure functions).

A 1.0 card lists ``supportedInterfaces`` (``url``, ``protocolBinding``,
``protocolVersion``, optional ``tenant``); a 0.3 card has ``url`` + ``preferredTransport``
(default ``JSONRPC``) + ``additionalInterfaces`` (``url``, ``transport``) and a
``protocolVersion`` like ``0.3.0``. Both kinds count. The platform speaks ``HTTP+JSON`` and
``JSONRPC`` in ``1.0`` and ``0.3``; among the interfaces it speaks it prefers 1.0 over 0.3,
then HTTP+JSON over JSON-RPC, then the card's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from agent_profiles.interfaces import BINDINGS, HTTP_JSON, JSONRPC, V0_3, V1_0, VERSIONS
from platform_site.errors import ValidationFailed


class InvalidCard(ValidationFailed):
    """A card that is served but is not an agent card (or cannot be used)."""

    code = "invalid_agent_card"


class NoSupportedInterface(ValidationFailed):
    """An agent card offering no interface the platform speaks."""

    code = "unsupported_agent_card"


@dataclass(frozen=True)
class Interface:
    """One way to call the agent, as a card offers it."""

    binding: str
    version: str
    url: str
    tenant: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "binding": self.binding,
            "version": self.version,
            "url": self.url,
            "tenant": self.tenant,
        }

    def describe(self) -> str:
        return f"{self.binding} {self.version} at {self.url}"


@dataclass(frozen=True)
class ParsedCard:
    """What the platform keeps from a card."""

    interfaces: list[Interface]  # every interface offered, the card's order
    streaming: bool = False
    push_notifications: bool = False
    security_schemes: dict[str, Any] = field(default_factory=dict)
    security_requirements: list[Any] = field(default_factory=list)
    # Whether the card's input modes admit JSON data: "" for its defaultInputModes, a
    # skill's id for a skill with modes of its own; a card that names none is left out.
    json_input: dict[str, bool] = field(default_factory=dict)


def normalize_binding(raw: Any) -> str:
    """``HTTP+JSON`` / ``JSONRPC`` for their spellings; anything else upper-cased as is."""
    text = str(raw or "").strip().upper()
    compact = text.replace("-", "").replace("_", "").replace(" ", "")
    if compact in {"HTTP+JSON", "HTTPJSON", "REST"}:
        return HTTP_JSON
    if compact == "JSONRPC":
        return JSONRPC
    return text


def normalize_version(raw: Any, default: str = "") -> str:
    """``1.0`` or ``0.3`` for ``1``, ``1.0``, ``1.0.x``, ``0.3``, ``0.3.x``; else the text."""
    text = str(raw or "").strip()
    if not text:
        return default
    parts = text.split(".")
    if parts[0] == "1" and (len(parts) == 1 or parts[1] == "0"):
        return V1_0
    if parts[0] == "0" and len(parts) > 1 and parts[1] == "3":
        return V0_3
    return text


def _url(raw: Any, base: str, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidCard(f"The agent card's {where} has no url.", {"field": where})
    try:
        url = urljoin(base, raw.strip())
        scheme = urlsplit(url).scheme
    except ValueError as exc:  # "http://[::1": a card's mistake, not the platform's (500)
        raise InvalidCard(
            f"The agent card's {where} url {raw!r} is malformed: {exc}.",
            {"field": where, "url": raw},
        ) from None
    if scheme not in {"http", "https"}:
        raise InvalidCard(
            f"The agent card's {where} url {raw!r} is not an http(s) URL.", {"field": where}
        )
    return url


def parse_card(card: Any, source_url: str) -> ParsedCard:
    """The interfaces and capabilities of ``card`` (parsed JSON), or :class:`InvalidCard`."""
    if not isinstance(card, dict):
        raise InvalidCard(
            f"The document at {source_url} is JSON but not an agent card (not an object).",
            {"cardUrl": source_url},
        )
    has_v1 = "supportedInterfaces" in card
    has_v03 = "url" in card
    if not (has_v1 or has_v03) or not isinstance(card.get("name"), str):
        raise InvalidCard(
            f"The document at {source_url} is JSON but not an agent card: it needs a 'name' "
            "and 'supportedInterfaces' (A2A 1.0) or 'url' (A2A 0.3).",
            {"cardUrl": source_url},
        )
    interfaces: list[Interface] = []
    if has_v1:
        listed = card["supportedInterfaces"]
        if not isinstance(listed, list):
            raise InvalidCard("The agent card's supportedInterfaces must be a list.", {})
        for index, item in enumerate(listed):
            where = f"supportedInterfaces[{index}]"
            if not isinstance(item, dict):
                raise InvalidCard(f"The agent card's {where} must be an object.", {})
            tenant = item.get("tenant") or ""
            interfaces.append(
                Interface(
                    binding=normalize_binding(item.get("protocolBinding")),
                    version=normalize_version(item.get("protocolVersion"), V1_0),
                    url=_url(item.get("url"), source_url, where),
                    tenant=tenant if isinstance(tenant, str) else "",
                )
            )
    if has_v03:
        version = normalize_version(card.get("protocolVersion"), V0_3)
        interfaces.append(
            Interface(
                binding=normalize_binding(card.get("preferredTransport") or JSONRPC),
                version=version,
                url=_url(card.get("url"), source_url, "url"),
            )
        )
        extra = card.get("additionalInterfaces") or []
        if not isinstance(extra, list):
            raise InvalidCard("The agent card's additionalInterfaces must be a list.", {})
        for index, item in enumerate(extra):
            where = f"additionalInterfaces[{index}]"
            if not isinstance(item, dict):
                raise InvalidCard(f"The agent card's {where} must be an object.", {})
            interfaces.append(
                Interface(
                    binding=normalize_binding(item.get("transport")),
                    version=version,
                    url=_url(item.get("url"), source_url, where),
                )
            )
    capabilities = card.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    schemes = card.get("securitySchemes")
    requirements = card.get("securityRequirements", card.get("security"))
    return ParsedCard(
        interfaces=interfaces,
        streaming=capabilities.get("streaming") is True,
        push_notifications=capabilities.get("pushNotifications") is True,
        security_schemes=schemes if isinstance(schemes, dict) else {},
        security_requirements=requirements if isinstance(requirements, list) else [],
        json_input=_json_input(card),
    )


# Input modes (media types) under which a data part is welcome; besides these, any
# ``application/...+json``. Cards write modes loosely ("text", "json", "data").
_JSON_MODES = frozenset({"application/json", "json", "data", "*/*", "*", "application/*"})
_TEXT_MODES = frozenset({"text", "*/*", "*"})


def admits_json(modes: Any) -> bool | None:
    """Whether ``modes`` (an agent's input modes, a client's accepted output modes) admit
    JSON data; None when they name none (anything goes)."""
    named = _named(modes)
    if not named:
        return None
    return any(m in _JSON_MODES or m.endswith("+json") for m in named)


def admits_text(modes: Any) -> bool | None:
    """Whether ``modes`` admit plain text (``text``, ``text/plain``, ``text/*``, any); None
    when they name none (anything goes)."""
    named = _named(modes)
    if not named:
        return None
    return any(m in _TEXT_MODES or m.startswith("text/") for m in named)


def _named(modes: Any) -> list[str]:
    """The media types ``modes`` names, without parameters, lower case."""
    if not isinstance(modes, list):
        return []
    return [m.split(";")[0].strip().lower() for m in modes if isinstance(m, str) and m.strip()]


def _json_input(card: dict[str, Any]) -> dict[str, bool]:
    found: dict[str, bool] = {}
    default = admits_json(card.get("defaultInputModes"))
    if default is not None:
        found[""] = default
    skills = card.get("skills")
    for skill in skills if isinstance(skills, list) else []:
        if not isinstance(skill, dict) or not isinstance(skill.get("id"), str):
            continue
        admits = admits_json(skill.get("inputModes"))
        if admits is not None and admits != found.get("", True):
            found[skill["id"]] = admits
    return found


def spoken(interfaces: list[Interface]) -> list[Interface]:
    """The interfaces the platform speaks, best first (1.0, then HTTP+JSON, then order)."""
    usable = [i for i in interfaces if i.binding in BINDINGS and i.version in VERSIONS]
    return sorted(
        usable,
        key=lambda i: (VERSIONS.index(i.version), BINDINGS.index(i.binding)),
    )


def describe_offer(interfaces: list[Interface]) -> str:
    return ", ".join(i.describe() for i in interfaces) or "no interfaces"


def no_supported_interface(interfaces: list[Interface], source_url: str) -> NoSupportedInterface:
    return NoSupportedInterface(
        f"The agent card at {source_url} offers no interface the platform speaks "
        f"(HTTP+JSON or JSONRPC, protocol 1.0 or 0.3); it offers {describe_offer(interfaces)}.",
        {"cardUrl": source_url, "offered": [i.as_dict() for i in interfaces]},
    )
