"""``CREDENTIALS_KEY`` at work: its documented rotation (``manage.py rotatecredentials``)
and a stored credential no key reads any more.

Why: the rotation said "re-save the credentials", which nothing but typing every agent's
secret again did (a credential is write-only); and a credential the key changed under
was called without, refused by the agent as "(no credential configured)" while the admin
said one was configured."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from a2a import creation
from a2a.states import NextAction, TaskState, Transport
from a2a.transports import credentials as outbound_credentials
from agent_profiles import health
from agent_profiles.credentials import read_credentials, set_credentials
from agent_profiles.health import health_of
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentProfile, HealthStatus
from tests.a2a.test_peers import drive, settled
from tests.support.login_guarded_agent import BEARER, login_guarded_agent

pytestmark = pytest.mark.django_db

SECRET = "tok-rotate-me-very-secret-4711"


def key() -> str:
    return Fernet.generate_key().decode()


def with_credential(make_agent: Any, skill: Any, agent_id: str, token: str = SECRET) -> Any:
    agent = make_agent(skills=[skill], id=agent_id, a2a_endpoint="http://127.0.0.1:9/")
    set_credentials(agent, {"type": "bearer", "token": token})
    agent.save()
    return agent


def stored(agent_id: str) -> str:
    return AgentProfile.objects.get(pk=agent_id).auth_encrypted


def rotate() -> str:
    out = io.StringIO()
    call_command("rotatecredentials", stdout=out)
    return out.getvalue()


@contextmanager
def stopped_for_an_unreadable_credential(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any
) -> Iterator[tuple[Any, Any, Any, Any, str]]:
    """An agent behind a login guard whose credential was stored under a key replaced
    since, and a task driven until the unreadable credential stopped it: ``(peer, guard,
    agent, task, the key it was stored under)``."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    outbound_credentials.forget_tokens()
    right = key()
    settings.CREDENTIALS_KEY = right
    skill = make_skill(id="ce-review")
    with login_guarded_agent() as (peer, guard):
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(agent, {"type": "bearer", "token": BEARER})
        agent.save()
        settings.CREDENTIALS_KEY = key()  # the key changed (a deploy with a wrong one)
        data = {"product": "lamp", "behaviour": "complete"}
        task = creation.create_task(skill_id="ce-review", input=data, user=make_user())
        task = drive(task, lambda t: t.transport == Transport.OFFLINE or settled(t))
        assert task.error["code"] == "credentials_unreadable"
        yield peer, guard, agent, task, right


def test_the_documented_rotation_needs_no_secret(
    make_agent: Any, make_skill: Any, settings: Any
) -> None:
    """``new,old``, ``rotatecredentials``, then ``new`` alone: every credential reads."""
    skill = make_skill()
    old, new = key(), key()
    settings.CREDENTIALS_KEY = old
    with_credential(make_agent, skill, "agent-one")
    with_credential(make_agent, skill, "agent-two", token="another-secret-0815")
    make_agent(skills=[skill], id="agent-three")  # no credential: nothing to do
    settings.CREDENTIALS_KEY = f"{new},{old}"
    output = rotate()
    assert "Re-encrypted 2 credential(s)" in output
    assert SECRET not in output
    for agent_id in ("agent-one", "agent-two"):
        Fernet(new.encode()).decrypt(stored(agent_id).encode())  # under the new key now
    assert stored("agent-three") == ""
    settings.CREDENTIALS_KEY = new  # the old key dropped
    assert read_credentials(AgentProfile.objects.get(pk="agent-one")) == {
        "type": "bearer",
        "token": SECRET,
    }
    assert read_credentials(AgentProfile.objects.get(pk="agent-two"))["token"] == (
        "another-secret-0815"
    )


def test_a_credential_no_key_reads_is_named_and_left_as_it_is(
    make_agent: Any, make_skill: Any, settings: Any
) -> None:
    """The others are rotated; the command fails naming the agent (never a secret), so a
    script does not go on to drop the old key."""
    skill = make_skill()
    lost, old, new = key(), key(), key()
    settings.CREDENTIALS_KEY = lost
    with_credential(make_agent, skill, "agent-lost")
    settings.CREDENTIALS_KEY = old
    with_credential(make_agent, skill, "agent-one")
    before = stored("agent-lost")
    settings.CREDENTIALS_KEY = f"{new},{old}"
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("rotatecredentials", stdout=out)
    assert "agent-lost" in str(refused.value)
    assert "cannot be decrypted with any CREDENTIALS_KEY" in str(refused.value)
    assert SECRET not in str(refused.value) + out.getvalue()
    assert "Re-encrypted 1 credential(s)" in out.getvalue()
    assert stored("agent-lost") == before
    Fernet(new.encode()).decrypt(stored("agent-one").encode())
    # Listing the lost key lets a second run finish the job.
    settings.CREDENTIALS_KEY = f"{new},{old},{lost}"
    assert "Re-encrypted 2 credential(s)" in rotate()
    settings.CREDENTIALS_KEY = new
    assert read_credentials(AgentProfile.objects.get(pk="agent-lost"))["token"] == SECRET


def test_a_rotation_is_no_credential_change_for_dispatch(
    make_agent: Any, make_skill: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The secret is the same: the agent's tasks waiting on a refused credential are not
    taken up again (a2a.follow_policy watches the saves; this writes by update)."""
    from a2a import follow_policy

    seen: list[str] = []
    monkeypatch.setattr(follow_policy, "credentials_changed", seen.append)
    settings.CREDENTIALS_KEY = key()
    with_credential(make_agent, make_skill(), "agent-one")
    settings.CREDENTIALS_KEY = f"{key()},{settings.CREDENTIALS_KEY}"
    rotate()
    assert seen == []


# --- a credential no key reads -----------------------------------------------------------


def test_an_unreadable_credential_is_told_as_such_and_nothing_is_sent(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any
) -> None:
    """Not called without it (the agent would refuse "no credential configured", or worse
    take a call the operator meant to authenticate): ``credentials_unreadable`` at once,
    naming the key. Not held against the agent, which refused nothing: recorded in its
    health, it showed unhealthy after a passing check, out of matching."""
    with stopped_for_an_unreadable_credential(make_agent, make_skill, make_user, settings) as (
        peer,
        guard,
        agent,
        task,
        _,
    ):
        target = call_target(AgentProfile.objects.get(pk=agent.pk))
        assert (target.auth, target.auth_unreadable) == (None, True)
        assert task.state == TaskState.SUBMITTED
        message = task.error["message"]
        assert "stored credential cannot be decrypted (CREDENTIALS_KEY changed?)" in message
        assert "no credential configured" not in message
        assert guard.counts["/message:send"] == 0  # nothing went out
        assert peer.sends == 0
        agent.refresh_from_db()
        assert agent.last_call_code != "credentials_unreadable"
        assert health_of(agent).status != HealthStatus.UNHEALTHY


def test_the_key_put_back_sends_the_stopped_task_at_the_next_check(
    make_agent: Any,
    make_skill: Any,
    make_user: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The message's advice, "put the key back", saves no credential: nothing told
    dispatch, and the task waited offline for a gateway connection the agent never
    makes, failing at its deadline. A passing check sends it again once the credential
    reads; not while it still does not (it would only stop again)."""
    with stopped_for_an_unreadable_credential(make_agent, make_skill, make_user, settings) as (
        _peer,
        guard,
        agent,
        task,
        right,
    ):
        with django_capture_on_commit_callbacks(execute=True):  # the key still wrong
            assert health.check_agents() == {agent.pk: HealthStatus.HEALTHY}
        task.refresh_from_db()
        assert task.transport == Transport.OFFLINE

        settings.CREDENTIALS_KEY = right  # the operator follows the message's advice
        with django_capture_on_commit_callbacks(execute=True):
            assert health.check_agents() == {agent.pk: HealthStatus.HEALTHY}
        task.refresh_from_db()
        assert (task.transport, task.next_action) == (Transport.A2A, NextAction.SEND)
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert guard.counts["/message:send"] == 1
        agent.refresh_from_db()
        assert health_of(agent).status == HealthStatus.HEALTHY


def test_an_unreadable_credential_set_again_sends_the_task_at_once(
    make_agent: Any,
    make_skill: Any,
    make_user: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The message's other advice: the credential set again (the admin) is a new one."""
    with stopped_for_an_unreadable_credential(make_agent, make_skill, make_user, settings) as (
        _peer,
        _guard,
        agent,
        task,
        _,
    ):
        with django_capture_on_commit_callbacks(execute=True):
            profile = AgentProfile.objects.get(pk=agent.pk)
            set_credentials(profile, {"type": "bearer", "token": BEARER})
            profile.save()
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})


def test_a_key_list_without_a_key_set_at_run_time_is_a_configuration_error(
    settings: Any,
) -> None:
    """The start refuses it (tests/platform_site/test_credentials_key_setting.py); set
    another way, it is the same clear error, not MultiFernet's bare ValueError."""
    from django.core.exceptions import ImproperlyConfigured

    from agent_profiles.credentials import encrypt

    settings.CREDENTIALS_KEY = ","
    with pytest.raises(ImproperlyConfigured, match="comma-separated Fernet keys"):
        encrypt({"type": "bearer", "token": SECRET})


def test_the_first_key_set_reads_what_the_derived_key_wrote(
    make_agent: Any, make_skill: Any, settings: Any
) -> None:
    """Unset, the key is derived from SECRET_KEY, which no CREDENTIALS_KEY can list:
    setting one made every stored credential unreadable. The derived key still decrypts,
    and rotatecredentials moves them under the new key."""
    skill = make_skill()
    settings.CREDENTIALS_KEY = ""
    with_credential(make_agent, skill, "agent-one")
    new = key()
    settings.CREDENTIALS_KEY = new
    assert read_credentials(AgentProfile.objects.get(pk="agent-one"))["token"] == SECRET
    assert "Re-encrypted 1 credential(s)" in rotate()
    Fernet(new.encode()).decrypt(stored("agent-one").encode())
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40  # the derived key is gone too
    assert read_credentials(AgentProfile.objects.get(pk="agent-one"))["token"] == SECRET
