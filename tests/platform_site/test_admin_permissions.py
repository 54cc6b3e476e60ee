"""The admin's actions change things (rotate a key, disable an agent, revoke a key, cancel a
task, requeue an offline task, enable a webhook again), so they take the permission to
change the model: a staff user who may only *view* is not offered them and cannot post
them, while the task and agent pages' buttons already answered such a user 403. Before,
no action named a permission and Django offered every one to anyone who could open the
list. Superusers keep everything; a staff user holding the change permission runs them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Q
from django.test import Client, RequestFactory
from django.urls import reverse

from a2a import agent_updates, creation
from a2a.face import push_configs
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from a2a.states import TaskState
from agent_profiles.authentication import authenticate_bearer
from agent_profiles.models import AgentProfile, AgentStatus, UserToken
from gateway import services as gateway_services
from gateway.models import Delivery, OfflineTask

pytestmark = pytest.mark.django_db

# The platform's own admins (a library's, like django-axes' "clean up expired attempts",
# keep their own rules).
PLATFORM_PACKAGES = {"a2a", "agent_profiles", "gateway", "platform_site"}
ADMINS_WITH_ACTIONS = sorted(
    (
        model_admin
        for model_admin in admin.site._registry.values()
        if model_admin.actions and type(model_admin).__module__.split(".")[0] in PLATFORM_PACKAGES
    ),
    key=lambda model_admin: model_admin.opts.label,
)


def declared_actions(model_admin: admin.ModelAdmin) -> set[str]:
    """The names of the actions a model admin declares (names or functions)."""
    return {a if isinstance(a, str) else a.__name__ for a in model_admin.actions}


def make_staff(username: str, perms: Q | None = None, *, superuser: bool = False) -> Any:
    """A staff user holding the permissions ``perms`` selects (or a superuser)."""
    user = get_user_model().objects.create_user(
        username, f"{username}@example.com", "pw-staff-1", is_staff=True, is_superuser=superuser
    )
    if perms is not None:
        user.user_permissions.add(*Permission.objects.filter(perms))
    return user


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def may_change(*models: str) -> Q:
    """Every view permission, and the change permission of ``models``."""
    return Q(codename__startswith="view_") | Q(codename__in=[f"change_{m}" for m in models])


VIEW_ONLY = Q(codename__startswith="view_")


@pytest.fixture
def viewer() -> Client:
    """A staff user who may view every model and change none."""
    return logged_in(make_staff("viewer", VIEW_ONLY))


@pytest.fixture
def asked_task(
    make_skill: Callable[..., Any], make_agent: Callable[..., Any], make_user: Callable[..., Any]
) -> Task:
    """A task whose agent asks "EU or UK?" (INPUT_REQUIRED)."""
    skill = make_skill()
    make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )
    return task


def post_action(client: Client, changelist: str, action: str, *ids: Any) -> Any:
    data = {"action": action, "_selected_action": [str(pk) for pk in ids]}
    return client.post(reverse(changelist), data, follow=True)


@pytest.mark.parametrize("model_admin", ADMINS_WITH_ACTIONS, ids=lambda m: m.opts.label)
def test_actions_are_offered_to_who_may_change_the_model_and_to_superusers_only(
    model_admin: admin.ModelAdmin,
) -> None:
    """Every admin that declares actions, now and later: view-only staff get none."""
    request = RequestFactory().get("/admin/")
    name = model_admin.opts.model_name
    request.user = make_staff("viewer", VIEW_ONLY)
    assert model_admin.get_actions(request) == {}
    # The change permission of the model (and of tasks: cancelling an offline task
    # cancels the task) is what the actions take.
    request.user = make_staff("operator", may_change(name, "task"))
    assert set(model_admin.get_actions(request)) == declared_actions(model_admin)
    request.user = make_staff("root", superuser=True)
    assert declared_actions(model_admin) <= set(model_admin.get_actions(request))


def test_view_only_staff_see_no_action_dropdown_on_the_agent_list(
    viewer: Client, make_agent: Callable[..., AgentProfile]
) -> None:
    make_agent()
    page = viewer.get(reverse("admin:agent_profiles_agentprofile_changelist"))
    assert page.status_code == 200
    assert "agent-one" in page.content.decode()
    assert 'name="action"' not in page.content.decode()


@pytest.mark.parametrize(
    ("action", "status"),
    [
        ("approve", AgentStatus.PENDING),
        ("disable", AgentStatus.ACTIVE),
        ("rotate_key", AgentStatus.ACTIVE),
    ],
)
def test_view_only_staff_cannot_approve_disable_or_rotate_agents(
    viewer: Client, make_agent: Callable[..., AgentProfile], action: str, status: str
) -> None:
    """Posted by hand, the action is refused as one not offered: nothing changes, and no
    new key is shown; the agent page's "Rotate the key" button answers 403 alike."""
    agent = make_agent(status=status)
    page = post_action(viewer, "admin:agent_profiles_agentprofile_changelist", action, agent.pk)
    shown = [w for w in page.content.decode().replace("<", " ").split() if w.startswith("a2a_")]
    assert shown == []
    assert AgentProfile.objects.get(pk=agent.pk).status == status
    assert authenticate_bearer(agent.raw_key) is not None
    button = reverse("admin:agent_profiles_agentprofile_rotate", args=[agent.pk])
    assert viewer.post(button).status_code == 403
    assert authenticate_bearer(agent.raw_key) is not None


def test_staff_who_may_change_agents_rotate_a_key(
    viewer: Client, make_agent: Callable[..., AgentProfile]
) -> None:
    agent = make_agent()
    changelist = "admin:agent_profiles_agentprofile_changelist"
    post_action(viewer, changelist, "rotate_key", agent.pk)
    assert authenticate_bearer(agent.raw_key) is not None  # the viewer could not
    operator = logged_in(make_staff("operator", may_change("agentprofile")))
    page = post_action(operator, changelist, "rotate_key", agent.pk).content.decode()
    assert f"New API key for {agent.pk}" in page
    assert authenticate_bearer(agent.raw_key) is None


def test_revoking_keys_and_tokens_takes_the_change_permission(
    viewer: Client, make_agent: Callable[..., AgentProfile], make_user: Callable[..., Any]
) -> None:
    """Keys and tokens are read-only rows (no Save button for anyone), so the permission
    is checked by the action itself: view-only staff cannot revoke, holders of the
    change permission (not superusers) can."""
    agent = make_agent()
    key = agent.api_keys.get()
    owner = make_user("owner")
    token = UserToken.objects.get(user=owner)
    post_action(viewer, "admin:agent_profiles_apikey_changelist", "revoke", key.pk)
    post_action(viewer, "admin:agent_profiles_usertoken_changelist", "revoke", token.pk)
    assert authenticate_bearer(agent.raw_key) is not None
    assert authenticate_bearer(owner.raw_token) is not None
    operator = logged_in(make_staff("operator", may_change("apikey", "usertoken")))
    post_action(operator, "admin:agent_profiles_apikey_changelist", "revoke", key.pk)
    post_action(operator, "admin:agent_profiles_usertoken_changelist", "revoke", token.pk)
    assert authenticate_bearer(agent.raw_key) is None
    assert authenticate_bearer(owner.raw_token) is None


@pytest.mark.parametrize(
    ("action", "state", "after"),
    [
        ("cancel_selected", TaskState.INPUT_REQUIRED, TaskState.CANCELED),
        ("retry_selected", TaskState.FAILED, TaskState.SUBMITTED),
    ],
)
def test_cancel_and_retry_from_the_task_list_take_the_change_permission(
    viewer: Client, asked_task: Task, action: str, state: str, after: str
) -> None:
    """The list's actions agree with the task page's buttons, which answer view-only
    staff 403: a view-only user changes nothing, one who may change tasks does."""
    Task.objects.filter(pk=asked_task.pk).update(state=state)
    post_action(viewer, "admin:a2a_task_changelist", action, asked_task.pk)
    assert Task.objects.get(pk=asked_task.pk).state == state
    operator = logged_in(make_staff("operator", may_change("task")))
    post_action(operator, "admin:a2a_task_changelist", action, asked_task.pk)
    assert Task.objects.get(pk=asked_task.pk).state == after


def test_the_task_page_shows_view_only_staff_no_buttons(
    viewer: Client, asked_task: Task, make_agent: Callable[..., AgentProfile]
) -> None:
    """The page reads the same, question included, without the Cancel and Reassign
    buttons and the reply form, which would answer 403; who may change tasks sees them."""
    make_agent(id="agent-two", skills=[asked_task.skill])
    url = reverse("admin:a2a_task_change", args=[asked_task.pk])
    page = viewer.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert "EU or UK?" in body
    assert 'id="cancel-task"' not in body
    assert 'id="reassign-task"' not in body
    assert 'id="reply-form"' not in body
    assert 'id="reply-not-allowed"' in body
    assert viewer.post(reverse("admin:a2a_task_cancel", args=[asked_task.pk])).status_code == 403
    reply = reverse("admin:a2a_task_reply", args=[asked_task.pk])
    assert viewer.post(reply, {"text": "EU"}).status_code == 403
    operator = logged_in(make_staff("operator", may_change("task")))
    body = operator.get(url).content.decode()
    assert 'id="cancel-task"' in body
    assert 'id="reassign-task"' in body
    assert 'id="reply-form"' in body


def test_the_agent_page_shows_view_only_staff_no_rotate_button(
    viewer: Client, make_agent: Callable[..., AgentProfile]
) -> None:
    agent = make_agent()
    url = reverse("admin:agent_profiles_agentprofile_change", args=[agent.pk])
    body = viewer.get(url).content.decode()
    assert "Current prefix" in body
    assert 'id="rotate-key"' not in body
    operator = logged_in(make_staff("operator", may_change("agentprofile")))
    assert 'id="rotate-key"' in operator.get(url).content.decode()


@pytest.fixture
def offline_task(make_skill: Callable[..., Any], make_agent: Callable[..., Any]) -> Task:
    """A task waiting offline for its agent (no endpoint, not connected)."""
    skill = make_skill()
    agent = make_agent(skills=[skill], a2a_endpoint="")
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "kettle"})
    gateway_services.push_task(task, reason="connect error")
    return task


def test_view_only_staff_cannot_requeue_or_cancel_offline_tasks(
    viewer: Client, offline_task: Task
) -> None:
    offline = OfflineTask.objects.get()
    queued_at = offline.queued_at
    for action in ("requeue", "cancel"):
        post_action(viewer, "admin:gateway_offlinetask_changelist", action, offline.pk)
    assert Delivery.objects.get().queued_at == queued_at
    assert Task.objects.get(pk=offline_task.pk).state == TaskState.SUBMITTED


def test_cancelling_an_offline_task_also_takes_the_permission_to_change_tasks(
    offline_task: Task,
) -> None:
    """Cancelling there cancels the platform task, which the task page refuses to who may
    not change tasks: requeue takes the offline tasks' change permission, cancel both."""
    changelist = "admin:gateway_offlinetask_changelist"
    offline = OfflineTask.objects.get()
    queued_at = offline.queued_at
    gateway_only = logged_in(make_staff("gateway-op", may_change("offlinetask")))
    post_action(gateway_only, changelist, "cancel", offline.pk)
    assert Task.objects.get(pk=offline_task.pk).state == TaskState.SUBMITTED
    post_action(gateway_only, changelist, "requeue", offline.pk)
    assert Delivery.objects.get().queued_at > queued_at
    operator = logged_in(make_staff("operator", may_change("offlinetask", "task")))
    post_action(operator, changelist, "cancel", offline.pk)
    assert Task.objects.get(pk=offline_task.pk).state == TaskState.CANCELED


def test_enabling_a_webhook_again_takes_the_change_permission(
    viewer: Client, asked_task: Task, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    config = push_configs.create_config(asked_task, {"url": "http://127.0.0.1:9/hook"})
    off = {"enabled": False, "consecutive_failures": 10, "disabled_reason": "x"}
    PushNotificationConfig.objects.filter(pk=config.pk).update(**off)
    changelist = "admin:a2a_pushnotificationconfig_changelist"
    post_action(viewer, changelist, "enable_again", config.pk)
    config.refresh_from_db()
    assert (config.enabled, config.consecutive_failures) == (False, 10)
    operator = logged_in(make_staff("operator", may_change("pushnotificationconfig")))
    post_action(operator, changelist, "enable_again", config.pk)
    config.refresh_from_db()
    assert (config.enabled, config.consecutive_failures) == (True, 0)
