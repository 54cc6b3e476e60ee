"""The outbound URL guard: nothing leaves the platform for a private address unless allowed.

Two moments, two checks:

- **When a URL is stored** (an agent's endpoint or card URL at registration, a push
  webhook when its config is created): :func:`check_url` refuses what is visibly unsafe
  without touching the network — a scheme other than http(s), credentials in the URL,
  ``localhost`` names, and IP literals in every spelling the resolver would accept
  (``127.1``, ``2130706433``, ``0x7f.0.0.1``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``,
  ``[::127.0.0.1]``, NAT64, 6to4 and Teredo addresses judged by the IPv4 address they
  embed). A public-looking name is accepted: DNS may be unavailable, or not point there yet.
- **When a request leaves** (a card fetch, a call to an agent, a push POST): the name is
  resolved, every address it resolves to is checked, and the connection goes to an address
  that was checked — never to a second resolution an attacker could have changed meanwhile
  (DNS rebinding). :mod:`agent_profiles.guarded_http` does this for httpx, keeping the
  ``Host`` header and the TLS server name (SNI, certificate check) of the URL.

:func:`check_outbound_url` (check and resolve, no connection) remains for callers that only
need the answer. Name resolution goes through :func:`resolve`, which tests replace with
:func:`use_resolver`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from platform_site.errors import ValidationFailed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class UnsafeURL(ValidationFailed):
    """An outbound URL that is malformed, not http(s), or points somewhere not allowed."""

    code = "invalid_url"


# --- judging one address --------------------------------------------------------------


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for (mapped, compatible, NAT64, 6to4,
    Teredo server and client); empty for an IPv4 address or plain IPv6."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    packed = address.packed
    if address in IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are IPv6's own
        return [ipaddress.IPv4Address(packed[12:])]
    if address in NAT64_WELL_KNOWN:
        return [ipaddress.IPv4Address(packed[12:])]
    if address in NAT64_LOCAL:
        # RFC 6052 for a /48 prefix: bits 48-63 and 72-95 (bits 64-71 are zero).
        return [ipaddress.IPv4Address(packed[6:8] + packed[9:11])]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` may not be called (e.g. ``"a loopback"``), or None if allowed."""
    embedded = embedded_ipv4(address)
    if embedded:
        for inner in embedded:
            reason = address_refusal(inner)
            if reason:
                return reason
        return None
    if address.is_multicast or address.is_unspecified:
        return "a multicast or unspecified"  # never a sensible target, whatever the settings
    if address.is_loopback:
        return None if settings.ALLOW_LOOPBACK_URLS else "a loopback"
    if address.is_link_local:
        kind = "a link-local"
    elif isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        # fec0::/10: deprecated (RFC 3879) but still routed inside some networks, and
        # Python counts it as global. It is never a public address.
        kind = "a private"
    elif address.is_global:
        return None
    else:
        kind = "a private"
    return None if settings.ALLOW_PRIVATE_URLS else kind


# --- parsing a URL without the network ------------------------------------------------


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells, in any form the system resolver takes as a number
    (``127.1``, ``2130706433``, ``0x7f.1``, ``0177.0.0.1``, IPv6 with a zone), else None."""
    text = host.strip().rstrip(".")
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        pass
    if not text or any(c not in "0123456789abcdefxABCDEFX." for c in text):
        return None
    try:  # inet_aton: decimal, octal and hex parts, 1 to 4 of them, like getaddrinfo
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


def _is_localhost_name(host: str) -> bool:
    name = host.strip().rstrip(".").lower()
    return name in ("localhost", "localhost6", "ip6-localhost", "ip6-loopback") or name.endswith(
        ".localhost"
    )


def names_this_machine_only(host: str) -> bool:
    """Whether ``host`` (as a URL spells it) can only mean the machine it is used on: a
    localhost name, a loopback address or the unspecified one (``0.0.0.0``, ``::``).
    Without the network: a name that resolves to a loopback address is not caught."""
    address = literal_address(host.strip("[]"))
    if address is not None:
        return address.is_loopback or address.is_unspecified
    return _is_localhost_name(host)


def split_url(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of an http(s) URL without credentials, else UnsafeURL."""
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
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UnsafeURL(f"URL {url!r} must not carry credentials.", {"url": url})
    _check_sendable(url, parts.hostname)
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _check_sendable(url: str, host: str) -> None:
    """Refuse what urlsplit takes but httpx cannot send: a host it cannot IDNA-encode
    (``xn--``, ``\ufb01.com``, a zero-width character) or a URL it cannot parse. Stored,
    such a URL failed every request later with an error no caller expected (a 500 at
    registration, one agent's health check stopping all the others)."""
    try:
        # Reading ``host`` back decodes an ``xn--`` label too, as a request does.
        httpx.URL(scheme="http", host=host).host  # noqa: B018
    except (httpx.InvalidURL, ValueError) as exc:
        raise UnsafeURL(
            f"URL {url!r} cannot be used: its host is not a valid name ({exc}).",
            {"url": url},
        ) from None
    try:
        httpx.URL(url).host  # noqa: B018
    except (httpx.InvalidURL, ValueError) as exc:
        reason = str(exc).rstrip(".")
        raise UnsafeURL(f"URL {url!r} is malformed: {reason}.", {"url": url}) from None


def _refuse(url: str, reason: str, address: Any) -> UnsafeURL:
    return UnsafeURL(
        f"URL {url!r} points to {reason} address {address}, which is not allowed here.",
        {"url": url, "address": str(address)},
    )


def check_url(url: str) -> None:
    """Refuse what is visibly unsafe in ``url``, without DNS (for URLs being stored)."""
    _scheme, host, _port = split_url(url)
    if _is_localhost_name(host):
        if not settings.ALLOW_LOOPBACK_URLS:
            raise _refuse(url, "a loopback", host)
        return
    address = literal_address(host)
    if address is not None and (reason := address_refusal(address)):
        raise _refuse(url, reason, address)


# --- resolving ------------------------------------------------------------------------


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


_resolver: Resolver = _system_resolver


@contextlib.contextmanager
def use_resolver(resolver: Resolver) -> Iterator[None]:
    """Resolve names with ``resolver(host, port) -> [address, ...]`` inside the block
    (tests: a name that resolves to 127.0.0.1; DNS that is unavailable)."""
    global _resolver
    previous, _resolver = _resolver, resolver
    try:
        yield
    finally:
        _resolver = previous


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` stands for (itself if it is an IP literal)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    if _is_localhost_name(host):
        return [ipaddress.ip_address("127.0.0.1")]
    try:
        raw = _resolver(host, port)
    except (OSError, UnicodeError) as exc:
        raise UnsafeURL(f"Host {host!r} cannot be resolved: {exc}.", {"host": host}) from None
    addresses: list[IPAddress] = []
    for item in raw:
        address = ipaddress.ip_address(str(item).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnsafeURL(f"Host {host!r} resolves to no address.", {"host": host})
    return addresses


def checked_addresses(url: str) -> list[IPAddress]:
    """Resolve ``url``'s host and return its addresses, refusing if any is unsafe."""
    check_url(url)
    _scheme, host, port = split_url(url)
    addresses = resolve(host, port)
    for address in addresses:
        reason = address_refusal(address)
        if reason:
            raise _refuse(url, reason, address)
    return addresses


def check_outbound_url(url: str) -> None:
    """Raise :class:`UnsafeURL` unless ``url`` is an http(s) URL whose host resolves only
    to allowed addresses (loopback needs ``ALLOW_LOOPBACK_URLS``; private, link-local and
    other non-global targets need ``ALLOW_PRIVATE_URLS``). Resolves the name: to store a
    URL use :func:`check_url`; to call one use
    :func:`agent_profiles.guarded_http.guarded_client`."""
    checked_addresses(url)
