from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from agent_profiles.guarded_http import guarded_async_client, guarded_client
from agent_profiles.urlguard import (
    UnsafeURL,
    check_outbound_url,
    check_url,
    use_resolver,
)
from tests.support.recorder import Recording, recording_server


@pytest.fixture
def strict(settings: Any) -> Any:
    settings.ALLOW_PRIVATE_URLS = False
    settings.ALLOW_LOOPBACK_URLS = False
    return settings


@pytest.mark.parametrize(
    "url", ["https://93.184.215.14/a2a", "http://[2606:4700::1111]:8080/x", "https://1.1.1.1"]
)
def test_it_allows_public_addresses(strict: Any, url: str) -> None:
    check_outbound_url(url)


@pytest.mark.parametrize(
    ("url", "word"),
    [
        ("http://127.0.0.1:8000/", "loopback"),
        ("http://localhost/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://192.168.1.20/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://[fd00::1]/", "private"),
        # Site-local fec0::/10, first and last address: Python calls it global.
        ("http://[fec0::1]/", "private"),
        ("http://[feff::1]:8080/x", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://0.0.0.0/", "unspecified"),
    ],
)
def test_it_refuses_non_public_addresses_by_default(strict: Any, url: str, word: str) -> None:
    with pytest.raises(UnsafeURL, match=word):
        check_outbound_url(url)


def test_loopback_setting_allows_loopback_only(strict: Any) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    check_outbound_url("http://127.0.0.1:9/")
    check_outbound_url("http://localhost:9/")
    with pytest.raises(UnsafeURL):
        check_outbound_url("http://10.0.0.1/")


def test_private_setting_allows_private_and_link_local(strict: Any) -> None:
    strict.ALLOW_PRIVATE_URLS = True
    check_outbound_url("http://10.0.0.1/")
    check_outbound_url("http://169.254.1.1/")
    check_outbound_url("http://[fec0::1]/")
    with pytest.raises(UnsafeURL, match="loopback"):
        check_outbound_url("http://127.0.0.1/")


@pytest.mark.parametrize(
    ("url", "word"),
    [
        ("ftp://example.com/", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("example.com/a2a", "http or https"),
        ("http:///path", "no host"),
        ("http://u:p@1.1.1.1/", "credentials"),
        ("http://1.1.1.1:99999/", "malformed"),
        ("", "required"),
        ("http://no-such-host.invalid/", "cannot be resolved"),
    ],
)
def test_it_refuses_malformed_urls(strict: Any, url: str, word: str) -> None:
    with pytest.raises(UnsafeURL, match=word) as info:
        check_outbound_url(url)
    assert info.value.code == "invalid_url"


# --- the check when a URL is stored: no DNS, every spelling of an unsafe literal --------


def _no_dns(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.0.0.1/",
        "http://0177.0.0.1/",
        "http://017700000001/",
        "http://127.0.0.1./",
        "http://LOCALHOST/",
        "http://localhost./",
        "http://agent.localhost/",
        "http://[::1]/",
        "http://[::ffff:7f00:1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::127.0.0.1]/",
        "http://[0:0:0:0:0:0:7f00:1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[64:ff9b:1:a9fe:a9:fe00::]/",
        "http://[2002:a9fe:a9fe::]/",
        "http://[2002:7f00:1::]/",
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo client 127.0.0.1
        "http://10.1.2.3/",
        "http://0xa.1.2.3/",
        "http://167772161/",
        "http://[fd12:3456::1]/",
        "http://[fec0::1]/",
        "http://[feff::1]/",
        "http://[fe80::1%25eth0]/",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/",
        "http://224.0.0.1/",
        "http://[ff02::1]/",
        "http://255.255.255.255/",
        "http://0.0.0.0/",
        "http://[::]/",
    ],
)
def test_storing_refuses_every_spelling_of_an_unsafe_address_without_dns(
    strict: Any, url: str
) -> None:
    with use_resolver(_no_dns), pytest.raises(UnsafeURL) as info:
        check_url(url)
    assert info.value.code == "invalid_url"


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "https://agents.example.org:8443/a2a",
        "https://93.184.215.14/a2a",
        "http://[2606:4700::1111]/",
        "http://[64:ff9b::5db8:d70e]/",  # NAT64 of a public address
        "http://[2002:5db8:d70e::1]/",  # 6to4 of a public address
    ],
)
def test_storing_accepts_public_urls_with_dns_unavailable(strict: Any, url: str) -> None:
    with use_resolver(_no_dns):
        check_url(url)


@pytest.mark.parametrize(
    ("url", "word"),
    [
        ("ftp://example.com/", "http or https"),
        ("javascript:alert(1)", "http or https"),
        ("http://user@example.com/", "credentials"),
        ("http://:pw@example.com/", "credentials"),
        ("https://", "no host"),
    ],
)
def test_storing_refuses_other_schemes_and_credentials(strict: Any, url: str, word: str) -> None:
    with pytest.raises(UnsafeURL, match=word):
        check_url(url)


def test_multicast_is_refused_even_when_private_targets_are_allowed(strict: Any) -> None:
    strict.ALLOW_PRIVATE_URLS = True
    strict.ALLOW_LOOPBACK_URLS = True
    check_url("http://10.0.0.1/")
    with pytest.raises(UnsafeURL, match="multicast"):
        check_url("http://224.0.0.1/")


# --- the check when a request leaves: resolve, refuse, connect to what was checked -----


def test_sending_refuses_a_name_that_resolves_to_loopback(strict: Any) -> None:
    check_url("http://rebind.example/hook")  # stored: it looks public
    loopback = use_resolver(lambda host, port: ["127.0.0.1"])
    with loopback, guarded_client() as client, pytest.raises(UnsafeURL, match="loopback"):
        client.post("http://rebind.example/hook", json={})
    with use_resolver(lambda host, port: ["127.0.0.1"]), pytest.raises(UnsafeURL):
        check_outbound_url("http://rebind.example/hook")


def test_sending_refuses_a_name_with_any_unsafe_address(strict: Any) -> None:
    answers = ["93.184.215.14", "10.0.0.7"]
    with use_resolver(lambda host, port: answers), pytest.raises(UnsafeURL, match="private"):
        check_outbound_url("https://mixed.example/")


@pytest.fixture
def server() -> Iterator[Recording]:
    with recording_server() as recording:
        yield recording


def test_the_connection_goes_to_the_checked_address_with_the_names_host_header(
    strict: Any, server: Recording
) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        # First answer safe (for this test, loopback is allowed), later ones private:
        # a second resolution would be refused; there must be only one per request.
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.9.9.9"]

    with use_resolver(rebinding), guarded_client(timeout=5) as client:
        response = client.post(f"http://hook.example:{server.port}/in", json={"a": 1})
    assert response.status_code == 200
    assert calls == ["hook.example"]
    assert [(s["host"], s["path"]) for s in server.seen] == [(f"hook.example:{server.port}", "/in")]


def test_redirects_are_not_followed(strict: Any, server: Recording) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    loopback = use_resolver(lambda host, port: ["127.0.0.1"])
    with loopback, guarded_client(timeout=5, follow_redirects=True) as client:
        response = client.post(f"http://hook.example:{server.port}/redirect")
    assert response.status_code == 302
    assert len(server.seen) == 1


@pytest.mark.anyio
async def test_the_async_client_pins_the_checked_address_too(
    strict: Any, server: Recording
) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    with use_resolver(lambda host, port: ["127.0.0.1"]):
        async with guarded_async_client(timeout=5) as client:
            response = await client.post(f"http://hook.example:{server.port}/in")
        assert response.status_code == 200
        strict.ALLOW_LOOPBACK_URLS = False
        async with guarded_async_client(timeout=5) as client:
            with pytest.raises(UnsafeURL, match="loopback"):
                await client.post(f"http://hook.example:{server.port}/in")
    assert [s["host"] for s in server.seen] == [f"hook.example:{server.port}"]
