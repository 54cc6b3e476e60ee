from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.urlguard import UnsafeURL, check_outbound_url


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
