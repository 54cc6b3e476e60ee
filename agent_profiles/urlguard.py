"""The outbound URL guard: nothing leaves the platform for a private address unless allowed.

Used for agent endpoints at registration and for push-notification webhooks. Hosts are
resolved and every address they resolve to is checked, so a public name pointing at a
private address is refused too.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from platform_site.errors import ValidationFailed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeURL(ValidationFailed):
    """An outbound URL that is malformed, not http(s), or points somewhere not allowed."""

    code = "invalid_url"


def check_outbound_url(url: str) -> None:
    """Raise :class:`UnsafeURL` unless ``url`` is an http(s) URL to an allowed address.

    Loopback targets need ``ALLOW_LOOPBACK_URLS``; private, link-local and other
    non-global targets need ``ALLOW_PRIVATE_URLS``.
    """
    host, port = _split(url)
    for address in resolve(host, port):
        reason = address_refusal(address)
        if reason:
            raise UnsafeURL(
                f"URL {url!r} points to {reason} address {address}, which is not allowed here.",
                {"url": url, "address": str(address)},
            )


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` may not be called (e.g. ``"a loopback"``), or None if allowed."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address.is_loopback:
        return None if settings.ALLOW_LOOPBACK_URLS else "a loopback"
    if address.is_global:
        return None
    if address.is_link_local:
        kind = "a link-local"
    elif address.is_multicast or address.is_unspecified:
        return "a multicast or unspecified"  # never a sensible target, whatever the settings
    else:
        kind = "a private"
    return None if settings.ALLOW_PRIVATE_URLS else kind


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` stands for (itself if it is an IP literal)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnsafeURL(f"Host {host!r} cannot be resolved: {exc}.", {"host": host}) from None
    return sorted({ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}, key=str)


def _split(url: str) -> tuple[str, int]:
    if not isinstance(url, str) or not url:
        raise UnsafeURL("A URL is required.", {"url": url})
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"URL {url!r} is malformed: {exc}.", {"url": url}) from None
    if parts.scheme not in {"http", "https"}:
        raise UnsafeURL(f"URL {url!r} must use http or https.", {"url": url})
    if not parts.hostname:
        raise UnsafeURL(f"URL {url!r} has no host.", {"url": url})
    if parts.username or parts.password:
        raise UnsafeURL(f"URL {url!r} must not carry credentials.", {"url": url})
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)
