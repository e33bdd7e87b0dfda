"""The review page in a real browser: headless Chromium (Debian's, driven by Selenium through Debian's
chromedriver) against `serve --workers 2` and the fake GitHub. Sign-in through the fake's OAuth, only the
allowed repositories, Post (one comment on the fake), Correct (stored), Useful (stored), a POST without the
CSRF token refused, and a user without a triage role seeing no repository's data. Screenshots of the queue and
the summary go to docs/incoming/. Under CI (`CI` set, as `.ci/run` does) a missing browser fails the test."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.service.queue.store import Store
from bot.service.review import records
from tests.fake_github import REPO, FakeGitHub, github_holding, issue_payload
from tests.review_helpers import OTHER, other_repo_payload
from tests.serve_process import Served, serving

pytestmark = pytest.mark.browser

ALICE, BOB = "alice-maintainer", "bob-reader"
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# The screenshots of the queue and the summary: DDL_TRIAGE_SCREENSHOTS=docs/img refreshes the docs' pictures.
SHOTS = Path(os.environ.get("DDL_TRIAGE_SCREENSHOTS") or Path(tempfile.gettempdir()) / "ddl-triage-screenshots")
WAIT_S = 60.0


def _browser_or_fail() -> None:
    missing = [path for path in (CHROMIUM, DRIVER) if not shutil.which(path)]
    if missing:
        message = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(permissions={ALICE: "triage", BOB: "read"}) as fake:
        fake.add_repo(OTHER, permissions={ALICE: "read", BOB: "read"})
        yield fake


@pytest.fixture
def served(github: FakeGitHub, tmp_path: Path) -> Iterator[Served]:
    client_id, secret = github.oauth_client
    with serving(github, tmp_path, workers=2, shadow="true", github_oauth_client_id=client_id,
                 github_oauth_client_secret=secret, github_web_url=github.base_url) as served:
        assert served.deliver(issue_payload(github)).status_code == 202
        assert served.deliver(other_repo_payload(github)).status_code == 202
        assert served.wait_idle() == {"done": 2}
        yield served


@pytest.fixture
def chrome() -> Iterator[Any]:
    _browser_or_fail()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, condition: Any) -> Any:
    """Until `condition` holds; an element read while a form's submit reloads the page is stale, and is read
    again from the new page."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def _sign_in(driver: Any, github: FakeGitHub, served: Served, login: str) -> None:
    from selenium.webdriver.common.by import By

    github.browser_user = login
    driver.get(f"{served.url}/review/login")
    driver.find_element(By.ID, "github-sign-in").click()
    _wait(driver, lambda d: d.current_url == f"{served.url}/review" and "signed in as" in d.page_source)


def test_a_maintainer_reviews_in_a_real_browser(chrome: Any, github: FakeGitHub, served: Served) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = chrome
    _sign_in(driver, github, served, ALICE)
    listed = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#repos a")]
    assert REPO in listed and OTHER not in listed
    driver.find_element(By.LINK_TEXT, REPO).click()
    card = _wait(driver, lambda d: d.find_element(By.ID, "issue-42"))
    assert "otherdist" not in driver.page_source
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / "review-queue.png"))

    card.find_element(By.CSS_SELECTOR, "button.post").click()
    _wait(driver, lambda d: d.find_element(By.ID, "notice"))
    served.wait_until(lambda: len(github.bot_comments(REPO, 42)) == 1, WAIT_S)
    # the page records who posted after GitHub answers: wait for that record, not only for the comment
    approvals = Store(served.database_url)
    try:
        served.wait_until(lambda: [d.approved_by for d in approvals.decisions(10, REPO)] == [ALICE], WAIT_S)
    finally:
        approvals.close()
    driver.refresh()
    card = _wait(driver, lambda d: d.find_element(By.ID, "issue-42"))
    assert "posted from this page by alice-maintainer" in card.text

    correct = card.find_element(By.CSS_SELECTOR, "form.correct")
    Select(correct.find_element(By.NAME, "axis")).select_by_value("symptom")
    correct.find_element(By.NAME, "value").send_keys("out_of_memory")
    correct.find_element(By.TAG_NAME, "button").click()
    _wait(driver, lambda d: "corrected to out_of_memory" in d.find_element(By.ID, "issue-42").text)
    _wait(driver, lambda d: d.find_element(By.ID, "issue-42")).find_element(By.CSS_SELECTOR, "button.useful").click()
    _wait(driver, lambda d: "Useful (1)" in d.find_element(By.ID, "issue-42").text)

    store = Store(served.database_url)
    try:
        assert store.corrections(REPO, 42) == {"symptom": "out_of_memory"}
        (decision,) = store.decisions(10, REPO)
        assert decision.posted and records.ratings(store, REPO)[decision.delivery_id].useful == 1
    finally:
        store.close()
    assert len(github.bot_comments(REPO, 42)) == 1 and github.bot_comments(OTHER, 7) == []

    driver.find_element(By.LINK_TEXT, "summary").click()
    _wait(driver, lambda d: d.find_element(By.ID, "axes"))
    assert "1 of 1 rated (100%)" in driver.find_element(By.ID, "summary").text
    driver.save_screenshot(str(SHOTS / "review-summary.png"))

    # A form sent without its CSRF token (as another site's form would be) is refused, and changes nothing.
    driver.get(f"{served.url}/review/{REPO}")
    driver.execute_script(
        "const b = document.querySelector('#issue-42 button.not-useful');"
        "b.form.querySelector('input[name=csrf]').remove(); b.form.requestSubmit(b);")
    _wait(driver, lambda d: "CSRF" in d.page_source)
    store = Store(served.database_url)
    try:
        assert records.ratings(store, REPO)[decision.delivery_id].not_useful == 0
    finally:
        store.close()


def test_a_user_without_a_triage_role_sees_no_repository_in_a_real_browser(
        chrome: Any, github: FakeGitHub, served: Served) -> None:
    from selenium.webdriver.common.by import By

    driver = chrome
    _sign_in(driver, github, served, BOB)
    assert driver.find_element(By.ID, "no-repos")
    for repo in (REPO, OTHER):
        driver.get(f"{served.url}/review/{repo}")
        assert "Not Found" in driver.page_source and "#42" not in driver.page_source
