"""The admin console in a real browser (Debian's chromium + chromium-driver via Selenium):
a person logs in, sees the waiting task on the dashboard, opens it, answers the agent,
watches it complete, and opens the agent's page. Screenshots go to a temporary folder
(printed). The platform runs as `make run` does, with JSON logs, which are checked too.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import global_settings
from django.contrib.auth import get_user_model
from django.test import override_settings

from tests.support.agents import run_agent
from tests.support.processes import embedded_platform

pytestmark = [pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WIDTH = 1280


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (CHROMIUM and DRIVER):
        pytest.skip("needs chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="console-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def shots() -> Callable[[Any, str], None]:
    folder = Path(tempfile.mkdtemp(prefix="console-screenshots-"))
    print(f"\nscreenshots in {folder}")
    count = [0]

    def shot(driver: Any, name: str) -> None:
        count[0] += 1
        driver.save_screenshot(str(folder / f"{count[0]:02d}-{name}.png"))

    shot.folder = folder  # type: ignore[attr-defined]
    return shot


def fits(driver: Any) -> bool:
    """Neither the page nor the list's own scroll box is wider than the window."""
    return bool(
        driver.execute_script(
            "const box = document.querySelector('#changelist .results');"
            "return document.documentElement.scrollWidth <= window.innerWidth"
            " && (!box || box.scrollWidth <= box.clientWidth);"
        )
    )


def wait_until(check: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def text(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def heading(driver: Any, css: str) -> str:
    """A card's heading as written (the stylesheet shows headings in capitals)."""
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, f"{css} h2").get_attribute("textContent"))


def test_a_person_finds_answers_and_follows_a_waiting_task(
    browser: Any,
    shots: Callable[[Any, str], None],
    transactional_db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
) -> None:
    from selenium.webdriver.common.by import By

    # Hashed as the platform process (real settings) checks it, not as tests hash.
    with override_settings(PASSWORD_HASHERS=global_settings.PASSWORD_HASHERS):
        get_user_model().objects.create_superuser("operator", "op@example.com", "console-pw-1")
    skill = make_skill()
    user = make_user()
    env = {"LOG_FORMAT": "json", "A2A_POLL_INTERVAL": 0.2, "A2A_SWEEP_INTERVAL": 0.3}
    with run_agent() as peer, embedded_platform(**env) as platform:
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        url = platform.url  # type: ignore[attr-defined]
        created = httpx.post(
            f"{url}/api/tasks",
            json={"skillId": skill.id, "input": {"product": "lamp", "behaviour": "ask"}},
            headers={"Authorization": f"Bearer {user.raw_token}"},
        )
        assert created.status_code == 201, created.text
        task_id = created.json()["id"]

        # Log in; the dashboard shows the waiting task.
        browser.get(f"{url}/admin/")
        browser.find_element(By.NAME, "username").send_keys("operator")
        browser.find_element(By.NAME, "password").send_keys("console-pw-1")
        browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        assert "A2A Agent Platform" in browser.title

        def waiting_one() -> bool:
            browser.get(f"{url}/admin/")
            return "1 task" in text(browser, "#waiting-card")

        wait_until(waiting_one, what="the dashboard to show the waiting task")
        assert heading(browser, "#tasks-card") == "Tasks by state"
        assert "input required 1 1 1" in text(browser, "#tasks-card")
        assert heading(browser, "#agents-card") == "Agents"
        shots(browser, "dashboard")

        # Two clicks: the inbox, then the task.
        browser.find_element(By.ID, "waiting-link").click()
        assert task_id[:8] in text(browser, "#result_list")
        assert "Which market: EU or UK?" in text(browser, "#result_list")
        assert fits(browser), f"the task list is cut off at {WIDTH} px"
        shots(browser, "inbox")
        browser.find_element(By.LINK_TEXT, task_id[:8]).click()

        # The task page: the question and the reply form on top, no raw JSON showing.
        assert text(browser, "#task-state").startswith("input required")
        assert text(browser, "#question-text") == "Which market: EU or UK?"
        question_top = browser.find_element(By.ID, "question").location["y"]
        assert question_top < 700  # above the fold
        raw = browser.find_element(By.CSS_SELECTOR, "#task-raw pre")
        assert not raw.is_displayed()
        assert '"remoteTaskId"' not in browser.find_element(By.ID, "content-main").text
        assert not browser.find_elements(By.NAME, "_save")
        shots(browser, "task-waiting")
        browser.find_element(By.NAME, "text").send_keys("EU")
        browser.find_element(By.ID, "send-answer").click()
        # A form POST: the click may return before the answer page has loaded.
        confirmation = wait_until(
            lambda: browser.find_elements(By.CSS_SELECTOR, ".messagelist"),
            what="the reply's confirmation",
        )
        assert "Reply sent to the agent." in confirmation[0].text

        def completed() -> bool:
            browser.refresh()
            return text(browser, "#task-state").startswith("completed")

        wait_until(completed, what="the task to complete")
        assert '"verdict": "pass"' in text(browser, "#task-output")
        assert "EU" in text(browser, "#task-thread")
        assert "took" in text(browser, "#task-summary")
        history = text(browser, "#task-history")
        for state in ("input required", "working", "completed"):
            assert state in history
        shots(browser, "task-completed")

        # The agent's page.
        browser.find_element(By.LINK_TEXT, agent.pk).click()
        assert heading(browser, "#agent-health") == "Status and health"
        assert heading(browser, "#agent-tasks") == "Tasks, last 24 h (1)"
        assert "offline" in text(browser, "#agent-presence")
        assert browser.find_element(By.ID, "rotate-key").is_displayed()
        shots(browser, "agent")
        browser.get(f"{url}/admin/agent_profiles/agentprofile/")
        assert agent.pk in text(browser, "#result_list")
        assert fits(browser), f"the agent list is cut off at {WIDTH} px"
        shots(browser, "agents")
        log = platform.log_text()
    (shots.folder / "platform.log").write_text(log)  # type: ignore[attr-defined]

    # JSON logs: every line parses; the lifecycle lines carry the task's ids; no noise.
    lines = []
    for raw in log.splitlines():
        if raw.startswith("{"):
            try:
                lines.append(json.loads(raw))
            except ValueError:
                pytest.fail(f"a log line that is not JSON: {raw[:300]}")
    assert lines
    plain = [r for r in log.splitlines() if r.strip() and not r.startswith("{")]
    # Only the two lines runplatform prints itself (stdout, not logging) are not JSON.
    assert not [r for r in plain if " INFO " in r or " WARNING " in r or "ERROR" in r], plain
    about = [line for line in lines if line.get("task_id") == task_id]
    messages = [line["message"] for line in about]
    assert any("created" in m for m in messages), messages
    assert any("waits for a person" in m for m in messages), messages
    assert any("ended TASK_STATE_COMPLETED" in m for m in messages), messages
    assert all(line.get("agent_id") == agent.pk for line in about), about
    assert "favicon.ico" not in log
    assert "No hostname was supplied" not in log
