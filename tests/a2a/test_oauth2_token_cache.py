"""The OAuth2 token cache: a short-lived token is reused for most of its life, and calls
that need the same token at once share one fetch.

The cache was kept until ``expires_in - 30 s``: a token living 30 s or less was never
reused (a 1 s task fetched 263 tokens for 263 calls). And the first calls of tasks starting
together each fetched one (12 tasks: about 8 token requests). The cache is per process
(embedded mode, and each distributed worker alike); within one, one fetch per credential.

The token endpoint is real (:mod:`tests.support.guarded_oauth_agent`), in front of a real
a2a-sdk agent that accepts only the tokens it issued.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.test import override_settings

from a2a import creation
from a2a.exceptions import A2AAuthError, A2ACallError, A2ATransientError
from a2a.states import TaskState
from a2a.transports import credentials
from agent_profiles.credentials import set_credentials
from agent_profiles.interfaces import CallTarget
from tests.a2a.helpers import embedded_workers, wait_for
from tests.a2a.test_peers import drive, settled
from tests.support.agents import TestAgent
from tests.support.guarded_oauth_agent import Guard, guarded_agent

CLIENT_SECRET = "client-secret-77"


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_HTTP_TIMEOUT = 5.0
    credentials.forget_tokens()


@pytest.fixture
def guarded() -> Iterator[tuple[TestAgent, Guard]]:
    with guarded_agent() as (peer, guard):
        guard.mode = "oauth2"
        yield peer, guard


def oauth(peer: TestAgent) -> dict[str, Any]:
    return {
        "type": "oauth2",
        "tokenUrl": peer.url + "/oauth/token",
        "clientId": "platform",
        "clientSecret": CLIENT_SECRET,
        "scopes": [],
    }


def target(peer: TestAgent) -> CallTarget:
    return CallTarget(agent_id="agent-one", url=peer.url, auth=oauth(peer))


def at_once(call: Callable[[], Any], count: int = 12) -> list[Any]:
    """``call`` from ``count`` threads released together; each one's result or error."""
    gate = threading.Barrier(count)

    def one(_: int) -> Any:
        gate.wait()
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


# --- how long a token is kept ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("lifetime", "kept"), [(3600, 3570), (300, 270), (60, 54), (20, 18), (1, 0.9), (0, 0)]
)
def test_a_token_is_kept_for_its_life_less_30_s_or_a_tenth_of_it(
    lifetime: float, kept: float
) -> None:
    """A flat 30 s margin kept a token living 30 s or less not at all."""
    assert credentials.kept_for(lifetime) == pytest.approx(kept)


def test_a_token_valid_for_20_seconds_is_reused_between_calls(
    guarded: tuple[TestAgent, Guard], make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A task of about a second (tens of polls) needs one token that lives 20 s."""
    peer, guard = guarded
    guard.expires_in = 20
    agent = make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint=peer.url)
    set_credentials(agent, oauth(peer))
    agent.save()
    task = creation.create_task(
        skill_id="ce-review",
        input={"product": "lamp", "behaviour": "slow", "seconds": 1},
        user=make_user(),
    )
    task = drive(task, settled)
    assert task.state == TaskState.COMPLETED, task.error
    calls = sum(n for path, n in guard.counts.items() if path.startswith(("/message", "/tasks")))
    assert calls > 2  # the send and polls: each went out with the one token
    assert guard.counts["/oauth/token"] == 1, (guard.counts["/oauth/token"], calls)


# --- what the cache keeps -------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The cache's clock, moved by hand; tokens of 60 kB living 10 s, fetched at no cost."""
    now = [1000.0]
    monkeypatch.setattr(credentials.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(credentials, "_fetch_token", lambda target, auth: ("t" * 60_000, 10.0))
    return now


def oauth_target(agent_id: str = "rotating", secret: str = "s", scopes: Any = ()) -> CallTarget:
    auth = {
        "type": "oauth2",
        "tokenUrl": "https://idp.example/token",
        "clientId": "c",
        "clientSecret": secret,
        "scopes": list(scopes),
    }
    return CallTarget(agent_id=agent_id, auth=auth)


def key_of(target: CallTarget) -> tuple[str, ...]:
    return credentials._cache_key(target, target.auth or {})


def test_expired_tokens_and_replaced_credentials_are_not_kept(clock: list[float]) -> None:
    """One entry per credential for the life of the process: 2,000 rotations of one
    agent's client secret kept 2,000 tokens (120 MB), each long expired."""
    for n in range(300):
        credentials.oauth2_token(oauth_target(secret=f"secret-{n}"))
        clock[0] += 20.0  # each token expired before the next rotation
    assert len(credentials._tokens) == 1
    # The tokens sent under the last few secrets are recognised in echoes (a call may
    # still run), no more.
    assert len(credentials._sent_tokens) == credentials.SENT_CREDENTIALS_KEPT
    credentials.oauth2_token(oauth_target(scopes=["read"]))  # other scopes replace it too
    assert list(credentials._tokens) == [key_of(oauth_target(scopes=["read"]))]


def test_a_replaced_credentials_tokens_are_still_recognised_however_long_its_call(
    clock: list[float],
) -> None:
    """Redaction reads the tokens sent under the call's own credential when the call
    ends: a stream or a held send started before a rotation may end days later (its
    task's timeout), and its token must still be redacted then; until more rotations
    than SENT_CREDENTIALS_KEPT went by."""
    old, new = oauth_target(secret="old"), oauth_target(secret="new")
    credentials.oauth2_token(old)
    clock[0] += 1.0
    credentials.oauth2_token(new)
    clock[0] += 7 * 24 * 3600.0
    credentials.oauth2_token(oauth_target(agent_id="other"))
    assert credentials.tokens_sent(old) == ("t" * 60_000,)
    assert key_of(new) not in credentials._tokens  # expired
    for n in range(credentials.SENT_CREDENTIALS_KEPT - 1):
        credentials.oauth2_token(oauth_target(secret=f"later-{n}"))
    assert credentials.tokens_sent(old) == ()
    assert credentials.tokens_sent(new) == ("t" * 60_000,)


def test_each_table_keeps_at_most_its_limit_the_oldest_going_first(
    clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credentials, "TOKENS_LIMIT", 5)
    for n in range(12):
        credentials.oauth2_token(oauth_target(agent_id=f"agent-{n}"))
    kept = {key[0] for key in credentials._tokens}
    assert kept == {f"agent-{n}" for n in range(7, 12)}
    assert {key[0] for key in credentials._sent_tokens} == kept


# --- one fetch for calls at once ------------------------------------------------------------


def test_calls_at_once_share_one_token_fetch(guarded: tuple[TestAgent, Guard]) -> None:
    """Twelve calls needing the token while it is being fetched wait for that fetch."""
    peer, guard = guarded
    guard.token_delay = 0.3
    tokens = at_once(lambda: credentials.oauth2_token(target(peer)))
    assert guard.counts["/oauth/token"] == 1
    assert tokens == guard.issued * 12


def test_a_failed_fetch_is_every_waiters_error_and_is_not_kept(
    guarded: tuple[TestAgent, Guard], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calls that waited for a fetch that failed fail with its error (each its own
    copy: each is redacted and stored on its own); the next call fetches again."""
    peer, guard = guarded
    # A failed fetch is not kept: a thread that reaches the cache only after the failure
    # fetches again, by design. So the token endpoint answers only once the 11 other
    # threads wait on the fetch (a delay let one in late on a loaded machine).
    guard.hold = threading.Event()
    waiting: list[int] = []
    wait_for_fetch = credentials._wait_for

    def waits(*args: Any) -> Any:
        waiting.append(1)
        if len(waiting) == 11:
            guard.hold.set()
        return wait_for_fetch(*args)

    monkeypatch.setattr(credentials, "_wait_for", waits)
    broken = CallTarget(agent_id="agent-one", url=peer.url, auth={**oauth(peer)})
    broken.auth["tokenUrl"] = peer.url + "/oauth/nowhere"  # the guard's 401
    errors = at_once(lambda: credentials.oauth2_token(broken))
    assert all(isinstance(error, A2AAuthError) for error in errors), errors
    assert len({id(error) for error in errors}) == 12
    assert {error.message for error in errors} == {errors[0].message}
    assert "refused the client credentials with HTTP 401" in errors[0].message
    assert guard.counts["/oauth/nowhere"] == 1
    credentials.oauth2_token(target(peer))  # a good credential of the agent: its own key
    with pytest.raises(A2AAuthError):
        credentials.oauth2_token(broken)
    assert guard.counts["/oauth/nowhere"] == 2


def test_a_fetch_failing_with_a_bug_is_told_to_its_waiters_by_type_only(
    guarded: tuple[TestAgent, Guard], monkeypatch: Any
) -> None:
    """Not a call's error: its text may quote anything, so the waiters name its type."""
    peer, _guard = guarded
    gate = threading.Event()

    def buggy(target: CallTarget, auth: dict[str, Any]) -> tuple[str, float]:
        gate.wait(0.3)
        raise RuntimeError(f"boom {CLIENT_SECRET}")

    monkeypatch.setattr(credentials, "_fetch_token", buggy)
    outcomes = at_once(lambda: credentials.oauth2_token(target(peer)), count=4)
    assert sum(isinstance(o, RuntimeError) for o in outcomes) == 1  # the one that fetched
    waited = [o for o in outcomes if isinstance(o, A2ACallError)]
    assert len(waited) == 3
    assert all(isinstance(o, A2ATransientError) for o in waited)
    assert {o.code for o in waited} == {"token_endpoint_unavailable"}
    assert "RuntimeError in the fetch it waited for" in waited[0].message
    assert CLIENT_SECRET not in waited[0].message


def test_a_waiter_gives_up_on_a_fetch_that_never_ends(
    guarded: tuple[TestAgent, Guard], settings: Any
) -> None:
    """Bounded by the fetch's own deadline: a waiter never waits longer than it may."""
    peer, guard = guarded
    settings.A2A_HTTP_TIMEOUT, settings.A2A_CONNECT_TIMEOUT = 0.2, 0.1
    key = credentials._cache_key(target(peer), oauth(peer))
    with credentials._tokens_lock:
        credentials._flights[key] = credentials._Flight()  # another thread's, stuck
    with pytest.raises(A2ATransientError, match="Gave up waiting") as gave_up:
        credentials.oauth2_token(target(peer))
    assert gave_up.value.code == "token_endpoint_unavailable"
    assert guard.counts["/oauth/token"] == 0


def test_a_fetch_in_progress_in_the_parent_is_not_waited_for_after_a_fork(
    guarded: tuple[TestAgent, Guard], monkeypatch: Any
) -> None:
    """A forked worker inherits the parent's flights, whose threads it has not: they
    would never end."""
    peer, guard = guarded
    key = credentials._cache_key(target(peer), oauth(peer))
    with credentials._tokens_lock:
        credentials._flights[key] = credentials._Flight()
    monkeypatch.setattr(credentials, "_flights_pid", -1)  # as if forked since
    assert credentials.oauth2_token(target(peer)) == guard.issued[0]
    assert guard.counts["/oauth/token"] == 1


def test_calls_refused_with_the_same_token_fetch_one_new_token(
    guarded: tuple[TestAgent, Guard],
) -> None:
    """After a 401 each call asks for another token than the one refused: one fetched by
    a concurrent call serves, where each fetched its own."""
    peer, guard = guarded
    first = credentials.oauth2_token(target(peer))
    guard.token_delay = 0.3
    renewed = at_once(lambda: credentials.oauth2_token(target(peer), refused=first))
    assert guard.counts["/oauth/token"] == 2
    assert set(renewed) == {guard.issued[1]} != {first}
    # Refused again later, it is fetched again (the cache held the refused one).
    assert credentials.oauth2_token(target(peer), refused=guard.issued[1]) == guard.issued[2]


def test_tasks_starting_together_share_one_token_fetch(
    transactional_db: None, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """Twelve tasks start at once on the embedded workers for an agent whose token lives
    an hour: one token request serves them all (it was about eight)."""
    skill, user = make_skill(id="ce-review"), make_user()
    with override_settings(A2A_POLL_INTERVAL=0.2), guarded_agent() as (peer, guard):
        guard.mode = "oauth2"
        guard.token_delay = 0.2
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(agent, oauth(peer))
        agent.save()
        with embedded_workers(sweep_interval=0.3):
            tasks = [
                creation.create_task(
                    skill_id="ce-review",
                    input={"product": "lamp", "behaviour": "slow", "seconds": 1},
                    user=user,
                )
                for _ in range(12)
            ]
            done = [wait_for(t) for t in tasks]
    assert {t.state for t in done} == {TaskState.COMPLETED}
    assert guard.counts["/oauth/token"] == 1, guard.counts["/oauth/token"]
