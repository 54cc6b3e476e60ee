"""Credential values that cannot go out in an HTTP header, and secrets in error texts.

A bearer token or an API key with a character outside visible ASCII (``€``, ``ö``, a
control character) was accepted at registration, then every call failed encoding the
header, and after five internal errors the task failed with the exception's repr, which
quoted ``'Bearer <the whole token>'`` in ``GET /api/tasks/{id}`` and the admin. Now the
registry refuses such a value naming the field (the registration API and the admin form,
both through :func:`agent_profiles.credentials.validate_credentials`); one stored before
(or an OAuth2 access token so answered) is an ``agent_auth_failed`` error naming the field;
an encoding error no check caught is one too; and an internal error's text is the
exception's type and redacted text, never its repr.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_reads, creation, engine, listing_fetch, transports, worker
from a2a.exceptions import A2AAuthError
from a2a.models import Task
from a2a.states import TERMINAL_STATES, TaskState, Transport
from a2a.transports import credentials as outbound_credentials
from a2a.transports import redaction
from a2a.transports.rest import RestTransport
from agent_profiles.credentials import read_credentials, set_credentials
from agent_profiles.interfaces import CallTarget, call_target
from agent_profiles.models import AgentProfile
from tests.a2a.test_peers import drive
from tests.agent_profiles.test_admin_calls import change_url, form
from tests.agent_profiles.test_registration import assert_error, assert_nothing_written, body
from tests.support.guarded_oauth_agent import guarded_agent

# Outside Latin-1 (``€``): the repro's token. Each secret below is unique in every text.
EURO_TOKEN = "tök€n-very-secret-42"
LATIN1_TOKEN = "tök-secret-latin1-77"  # Latin-1 but not ASCII: httpx refuses it
CONTROL_TOKEN = "ctl\x01secret-token-55"
SPACED_TOKEN = "two words-secret-66"
CYRILLIC_KEY = "ключ-secret-api-key-88"

pytestmark = pytest.mark.usefixtures("open_registration")


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_HTTP_TIMEOUT = 5.0
    outbound_credentials.forget_tokens()


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


def api_key(value: str) -> dict[str, Any]:
    return {"type": "apiKey", "in": "header", "name": "X-Api-Key", "value": value}


def start(user: Any) -> Task:
    return creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)


def not_sent(task: Task) -> bool:
    """The send failed over to the gateway (or the task ended): its error is set."""
    return task.transport == Transport.OFFLINE or task.state in TERMINAL_STATES


def shown(client: Any, staff_client: Any, task: Task, user: Any) -> str:
    """Everything an operator sees of ``task``: the API's JSON and the admin page."""
    api = client.get(f"/api/tasks/{task.pk}", HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    assert api.status_code == 200
    page = staff_client.get(f"/admin/a2a/task/{task.pk}/change/")
    assert page.status_code == 200
    return json.dumps(api.json(), ensure_ascii=False) + page.content.decode()


# --- 1. Refused where it is set --------------------------------------------------------


@pytest.mark.parametrize(
    ("auth", "field", "secret"),
    [
        ({"type": "bearer", "token": EURO_TOKEN}, "auth.token", EURO_TOKEN),
        ({"type": "bearer", "token": LATIN1_TOKEN}, "auth.token", LATIN1_TOKEN),
        ({"type": "bearer", "token": CONTROL_TOKEN}, "auth.token", CONTROL_TOKEN),
        ({"type": "bearer", "token": "bad\x7fsecret-token"}, "auth.token", "bad\x7fsecret"),
        # token68 is one word: a space (or tab) inside is not part of a bearer token
        ({"type": "bearer", "token": SPACED_TOKEN}, "auth.token", SPACED_TOKEN),
        ({"type": "bearer", "token": "tab\tsecret-token"}, "auth.token", "tab\tsecret"),
        (api_key(CYRILLIC_KEY), "auth.value", CYRILLIC_KEY),
        (api_key("ctl\x1bsecret-api-key"), "auth.value", "ctl\x1bsecret"),
        # a field value may hold spaces between its characters, not at its ends
        (api_key(" lead-secret-api-key"), "auth.value", "lead-secret"),
        (api_key("trail-secret-api-key\t"), "auth.value", "trail-secret"),
    ],
)
def test_a_value_no_http_header_can_carry_is_refused_at_registration_naming_the_field(
    register: Any, skill: Any, auth: dict[str, Any], field: str, secret: str
) -> None:
    """It was accepted, then failed every call and leaked into the task's error."""
    error = assert_error(register(body(auth=auth)), 400, "validation_error")
    assert field in error["message"]
    assert "ASCII" in error["message"]
    assert secret not in json.dumps(error, ensure_ascii=False)
    assert_nothing_written()


@pytest.mark.parametrize(
    "auth",
    [
        {"type": "bearer", "token": "eyJhbGciOi.J9-_~+/x.sig=="},  # token68, padded
        {"type": "bearer", "token": "1|sanctum-style!token"},  # visible ASCII, one word
        api_key("Token key-with inner\tspaces"),  # a field value: inner spaces and tabs
    ],
)
def test_a_sendable_value_is_still_accepted(
    register: Any, skill: Any, auth: dict[str, Any]
) -> None:
    """The check refuses only what no HTTP stack sends, not what RFC 6750 frowns upon."""
    response = register(body(auth=auth))
    assert response.status_code == 201, response.content
    assert read_credentials(AgentProfile.objects.get()) == auth


def test_rotating_to_an_unsendable_value_is_refused_and_the_old_one_kept(
    register: Any, skill: Any
) -> None:
    """Re-registration sets credentials through the same check."""
    key = register(body(auth={"type": "bearer", "token": "good-token"})).json()["apiKey"]
    response = register(body(auth={"type": "bearer", "token": EURO_TOKEN}), key=key)
    error = assert_error(response, 400, "validation_error")
    assert "auth.token" in error["message"]
    assert EURO_TOKEN not in response.content.decode()
    agent = AgentProfile.objects.get()
    assert read_credentials(agent) == {"type": "bearer", "token": "good-token"}


def test_the_admin_form_refuses_an_unsendable_value_without_echoing_it(
    staff_client: Any, make_agent: Any
) -> None:
    """The admin's credential field goes through the registry's check too."""
    agent = make_agent()
    new_auth = json.dumps({"type": "bearer", "token": EURO_TOKEN})
    response = staff_client.post(change_url(agent), form(agent, new_auth=new_auth))
    assert response.status_code == 200  # the form again, with the error
    page = response.content.decode()
    assert "auth.token" in page
    assert "ASCII" in page
    assert EURO_TOKEN not in page
    assert AgentProfile.objects.get().auth_encrypted == ""


# --- 2. A value stored before the check: an auth error, never quoted -------------------


@pytest.mark.parametrize(
    ("auth", "secret", "field"),
    [
        ({"type": "bearer", "token": EURO_TOKEN}, EURO_TOKEN, "'token'"),
        ({"type": "bearer", "token": "crlf-secret\r\nX-Evil: 1"}, "crlf-secret", "'token'"),
        (api_key(CYRILLIC_KEY), CYRILLIC_KEY, "'value'"),
    ],
)
def test_a_stored_unsendable_value_is_agent_auth_failed_and_shown_nowhere(
    client: Any,
    staff_client: Any,
    make_agent: Any,
    skill: Any,
    make_user: Any,
    caplog: Any,
    auth: dict[str, Any],
    secret: str,
    field: str,
) -> None:
    """Registered before the registry refused it: every send raised UnicodeEncodeError,
    five internal errors, and ``internal_error`` quoting ``'Bearer <token>'``."""
    user = make_user()
    with guarded_agent() as (peer, _guard):
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(agent, auth)  # as stored before: no validation here
        agent.save()
        task = drive(start(user), not_sent)
    assert task.error["code"] == "agent_auth_failed", task.error
    assert field in task.error["message"]
    assert "set the credential again" in task.error["message"]
    assert "internalErrors" not in (task.metadata or {})  # a clear error, not a crash
    assert secret not in shown(client, staff_client, task, user) + caplog.text


@pytest.mark.parametrize(
    ("token", "secret"),
    [
        ("acc€ss-secret-token-1", "acc€ss-secret"),
        ("tok-crlf-secret\r\nX-Evil: 2", "tok-crlf-secret"),
        ("tok-spaced secret-3", "tok-spaced"),
    ],
)
def test_an_access_token_no_header_can_carry_is_agent_auth_failed_and_shown_nowhere(
    client: Any,
    staff_client: Any,
    make_agent: Any,
    skill: Any,
    make_user: Any,
    caplog: Any,
    token: str,
    secret: str,
) -> None:
    """The token endpoint's answer goes into the Authorization header as it is."""
    user = make_user()
    with guarded_agent() as (peer, guard):
        guard.mode, guard.access_token = "oauth2", token
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(
            agent,
            {
                "type": "oauth2",
                "tokenUrl": peer.url + "/oauth/token",
                "clientId": "platform",
                "clientSecret": "client-secret-77",
                "scopes": [],
            },
        )
        agent.save()
        task = drive(start(user), not_sent)
    assert task.error["code"] == "agent_auth_failed", task.error
    assert "answered an access_token that must be visible ASCII" in task.error["message"]
    assert secret not in shown(client, staff_client, task, user) + caplog.text


# --- 3. The backstop: an encoding error no check caught --------------------------------


@pytest.mark.parametrize("call", ["send", "stream"])
@pytest.mark.parametrize(
    ("token", "secret"), [(EURO_TOKEN, EURO_TOKEN), ("crlf-secret\r\nX-Evil: 1", "crlf-secret")]
)
def test_an_encoding_error_building_a_request_is_an_auth_error_without_the_value(
    monkeypatch: Any, call: str, token: str, secret: str
) -> None:
    """Should a value get past the checks, the header's encoding error (whose repr and
    text quote it: a ``UnicodeEncodeError``, http.client's ``Invalid header value``, h11's
    ``Illegal header value`` on a stream) becomes the transport's auth error, naming the
    scheme only, with the original not chained (a logged traceback would show it)."""
    monkeypatch.setattr(outbound_credentials, "header_value_problem", lambda *a, **k: None)
    with guarded_agent() as (peer, guard):
        target = CallTarget(agent_id="peer", url=peer.url, auth={"type": "bearer", "token": token})
        transport = RestTransport(target)
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}
        calls = {
            "send": lambda: transport.send(message),
            "stream": lambda: list(transport.stream(message, timeout=2)),
        }
        with pytest.raises(A2AAuthError) as refused:
            calls[call]()
    assert sum(guard.counts.values()) == 0  # nothing went out
    error = refused.value
    assert "peer" in error.message
    assert "bearer credential" in error.message
    assert secret not in f"{error!r} {error} {error.details}"
    assert error.__suppress_context__
    assert error.__cause__ is None


def test_an_encoding_error_without_a_credential_is_not_called_an_auth_error(
    monkeypatch: Any,
) -> None:
    """No credential, no credential to blame: the error goes on as it was."""

    def bad_headers(target: Any, **kwargs: Any) -> dict[str, str]:
        return {"A2A-Version": "1.0", "X-Odd": "€"}

    monkeypatch.setattr("a2a.transports.http.outgoing_headers", bad_headers)
    transport = RestTransport(CallTarget(agent_id="peer", url="http://127.0.0.1:9"))
    with pytest.raises(UnicodeEncodeError):
        transport.send({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]})


# --- 4. Internal errors: the type and the redacted text, never the repr ----------------


@pytest.mark.parametrize(
    "failure",
    [
        UnicodeEncodeError("latin-1", f"Bearer {EURO_TOKEN}", 9, 10, "ordinal not in range(256)"),
        ValueError(f"Invalid header value b'Bearer {EURO_TOKEN}'"),
    ],
)
def test_an_internal_error_stores_no_credential(
    client: Any,
    staff_client: Any,
    make_agent: Any,
    skill: Any,
    make_user: Any,
    monkeypatch: Any,
    failure: Exception,
) -> None:
    """``_internal_error`` wrote ``{exc!r}`` into the task's error: an encoding error's
    repr holds the whole header it failed on."""
    user = make_user()
    agent = make_agent(skills=[skill])
    set_credentials(agent, {"type": "bearer", "token": EURO_TOKEN})
    agent.save()

    def broken(task: Task) -> None:
        raise failure

    monkeypatch.setattr(worker, "ACTIONS", {action: broken for action in worker.ACTIONS})
    task = drive(start(user), lambda t: t.state == TaskState.FAILED)
    assert task.error["code"] == "internal_error"
    assert f"failed {worker.MAX_INTERNAL_ERRORS} times" in task.error["message"]
    assert type(failure).__name__ in task.error["message"]
    assert EURO_TOKEN not in shown(client, staff_client, task, user)


def test_an_internal_error_of_an_agent_whose_credential_cannot_be_read_shows_its_type(
    make_agent: Any, skill: Any, make_user: Any, monkeypatch: Any
) -> None:
    """Without the credential there is nothing to redact with: only the type is told."""
    agent = make_agent(skills=[skill])
    set_credentials(agent, {"type": "bearer", "token": EURO_TOKEN})
    agent.save()
    task = start(make_user())
    monkeypatch.setattr(worker, "call_target", lambda agent: 1 / 0)
    assert worker._described(task, ValueError(f"Bearer {EURO_TOKEN}")) == "ValueError"


def test_a_poll_or_listing_internal_error_stores_no_credential(
    make_agent: Any, skill: Any, make_user: Any, monkeypatch: Any
) -> None:
    """The poll engine and the listing wrapped a bug's ``{exc!r}`` in the call's error,
    outside the transports' redaction, and stored it as any agent error."""
    agent = make_agent(skills=[skill])
    set_credentials(agent, {"type": "bearer", "token": EURO_TOKEN})
    agent.save()
    target = call_target(AgentProfile.objects.get())
    failure = UnicodeEncodeError("latin-1", f"Bearer {EURO_TOKEN}", 9, 10, "not in range")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(agent_reads, "read_task", broken)
    task = start(make_user())
    polled = engine._call(engine.Polled(task=task, target=target))
    assert polled.error is not None
    assert "UnicodeEncodeError" in polled.error.message
    assert EURO_TOKEN not in polled.error.message

    monkeypatch.setattr(transports, "transport_for", broken)
    row = SimpleNamespace(since=timezone.now(), overlap=0)
    listing = listing_fetch.fetch(listing_fetch.Listing(row=row, target=target))  # type: ignore[arg-type]
    assert listing.error is not None
    assert "UnicodeEncodeError" in listing.error.message
    assert EURO_TOKEN not in listing.error.message


def test_describe_failure_redacts_the_agents_secrets_from_an_errors_text() -> None:
    """Text that quotes the credential (an http.client ``Invalid header value``) keeps
    what it says, not the secret."""
    target = CallTarget(
        agent_id="peer", url="http://x", auth={"type": "apiKey", "name": "X", "value": "k-s3cr3t"}
    )
    said = redaction.describe_failure(ValueError("Invalid header value b'k-s3cr3t'"), target)
    assert said == "ValueError: Invalid header value b'[redacted]'"
