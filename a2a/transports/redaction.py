"""Secrets out of what the platform quotes from agents' answers and its own errors.

An agent or token endpoint may echo the request in its error answer, and the platform
quotes what it answered in the task's error (and so in logs): :func:`redactor` knows every
form in which a credential went out (raw, as its header value, base64 in HTTP Basic,
URL- or form-encoded, JSON-escaped), so those quotes can be cleaned of it.
:func:`describe_failure` is the same for an exception no transport redacted.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

from a2a.exceptions import A2ACallError
from a2a.transports.credentials import tokens_sent
from a2a.transports.quoting import excerpt
from agent_profiles.interfaces import CallTarget

# What stands in for a secret in any text quoted from an answer.
REDACTED = "[redacted]"
# A quote cut short (``…``, see :func:`~a2a.transports.quoting.excerpt`) that ends in this many
# characters or more of a secret's start has them redacted too; fewer tell nothing.
PARTIAL = 4


class Redactor:
    """Replaces given secret strings (every form of them) in text quoted from an answer.

    Built only when a call failed (:func:`redactor`), so calls that succeed pay nothing.
    """

    def __init__(self, forms: Iterable[str]) -> None:
        # Longest first: a regex alternation takes the first form that matches, and a
        # whole header value ("Basic <b64>") must go as one, before a form inside it.
        self.forms = sorted({form for form in forms if form}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, self.forms))) if self.forms else None

    def text(self, text: str) -> str:
        """``text`` with every secret form, and a secret's start cut off by ``…``, redacted."""
        if self._pattern is None:
            return text
        text = self._pattern.sub(REDACTED, text)
        return self._cut_tails(text) if "…" in text else text

    def _cut_tails(self, text: str) -> str:
        # An excerpt cut in the middle of a secret ends in its first characters, which
        # no whole-form match finds: redact the longest secret start before each ``…``.
        pieces = text.split("…")
        for index, head in enumerate(pieces[:-1]):
            cut = 0
            for form in self.forms:
                for size in range(min(len(form), len(head)), max(cut, PARTIAL - 1), -1):
                    if head.endswith(form[:size]):
                        cut = size
                        break
            if cut:
                pieces[index] = head[:-cut] + REDACTED
        return "…".join(pieces)

    def value(self, value: Any) -> Any:
        """``value`` (an error's details: JSON-like) with its strings redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(item) for item in value)
        return value

    def error(self, exc: A2ACallError) -> None:
        """Redact ``exc`` in place: its message (and ``args``, which ``str()`` and log
        lines show) and its details, which become the task's ``error``."""
        if self._pattern is None:
            return
        exc.message = self.text(exc.message)
        exc.args = (exc.message, *exc.args[1:])
        exc.details = self.value(exc.details)


def _text(auth: dict[str, Any], key: str) -> str:
    value = auth.get(key)
    return value if isinstance(value, str) else ""


def _encodings(value: str) -> list[str]:
    """``value`` as it may come back: as sent, URL-encoded (a query, a path), form-encoded
    (a form body) and JSON-escaped (an echo in a JSON string: ``"`` and ``\\``, or ``/``
    as ``\\/`` from some serializers)."""
    escaped = json.dumps(value)[1:-1]
    return [
        value,
        quote(value, safe=""),
        quote_plus(value),
        escaped,
        escaped.replace("/", "\\/"),
    ]


def describe_failure(exc: BaseException, target: CallTarget | None) -> str:
    """``exc`` as text to store or log where no transport redacted it (a task's internal
    error, a failed poll or listing): its type and an excerpt of its text with every secret
    a call to ``target`` sends redacted; only its type where ``target`` is unknown.

    Never its repr: a ``UnicodeEncodeError``'s holds the whole string it could not encode,
    say a header with the credential (of a ``UnicodeError`` only the reason is shown: its
    text quotes a character of that string).
    """
    name = type(exc).__name__
    if target is None:
        return name
    said = str(getattr(exc, "reason", "")) if isinstance(exc, UnicodeError) else str(exc)
    said = redactor(target).text(excerpt(said))
    return f"{name}: {said}" if said else name


def redactor(target: CallTarget, extra: Iterable[str] = ()) -> Redactor:
    """A :class:`Redactor` of every secret a call to ``target`` sent: its credential in
    each form it went out in, the OAuth2 tokens fetched for it, and ``extra`` (say, a
    push-notification token in the request's body)."""
    auth = target.auth if isinstance(target.auth, dict) else {}
    kind = auth.get("type")
    sent: list[str] = [value for value in extra if value]
    if kind == "bearer":
        token = _text(auth, "token")
        sent += [token, f"Bearer {token}"] if token else []
    elif kind == "apiKey":
        sent.append(_text(auth, "value"))
    elif kind == "oauth2":
        client_id, secret = _text(auth, "clientId"), _text(auth, "clientSecret")
        if secret:
            sent.append(secret)
            # HTTP Basic as httpx sends it (id and secret form-encoded first, RFC 6749
            # 2.3.1) and as an agent's own client might: base64 of "id:secret".
            for pair in (
                f"{quote(client_id, safe='')}:{quote(secret, safe='')}",
                f"{client_id}:{secret}",
            ):
                basic = base64.b64encode(pair.encode()).decode()
                sent += [basic, f"Basic {basic}"]
        for token in tokens_sent(target):
            sent += [token, f"Bearer {token}"]
    return Redactor(form for value in sent if value for form in _encodings(value))
