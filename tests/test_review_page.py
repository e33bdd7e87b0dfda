"""The review page (`/review`): who sees it (GitHub sign-in, roles read with the user's token, the ops token),
the session cookie and the CSRF token, one repository's data never on another's page; the queue, Post (one
comment, the live path), Correct (stored and learned as `/triage` is), Useful / Not useful and the summary.
In process against the fake GitHub; `test_review_browser.py` drives the same in headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.handlers.feedback import feedback_cases
from bot.service.review import records
from bot.service.review.view import render_markdown
from tests.fake_github import REPO, FakeGitHub, deliver, github_holding, issue_payload, state_of, wait_idle
from tests.review_helpers import OTHER, browser, csrf_of, other_repo_payload, review_settings, sign_in_with_github

ALICE, BOB = "alice-maintainer", "bob-reader"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(permissions={ALICE: "triage", BOB: "read"}) as fake:
        fake.add_repo(OTHER, permissions={ALICE: "read", BOB: "read"})
        yield fake


@pytest.fixture
def review(app_settings: Settings, github: FakeGitHub, private_engine: Engine) -> Iterator[TestClient]:
    """The service in shadow mode with one decision on REPO (#42) and one on OTHER (#7)."""
    with browser(review_settings(app_settings, github), private_engine) as client:
        assert deliver(client, issue_payload(github)).status_code == 202
        assert deliver(client, other_repo_payload(github)).status_code == 202
        assert wait_idle(client, timeout=300) == {"done": 2}
        yield client


def decision_id(client: TestClient, repo: str) -> str:
    return state_of(client).store.decisions(10, repo)[0].delivery_id


def test_the_page_is_off_without_an_oauth_client_or_an_ops_token(
        app_settings: Settings, private_engine: Engine) -> None:
    off = app_settings.model_copy(update={"ops_token": None})
    with browser(off, private_engine) as client:
        for path in ("/review", "/review/login", "/review/login/github", f"/review/{REPO}"):
            assert client.get(path, follow_redirects=False).status_code == 404, path
        assert client.post("/review/login/ops", data={"token": "x"}).status_code == 404


def test_a_github_user_sees_and_acts_only_where_their_role_may_triage(review: TestClient, github: FakeGitHub) -> None:
    signed = sign_in_with_github(review, github, ALICE)
    assert signed.status_code == 303 and signed.headers["location"] == "/review"
    listing = review.get("/review")
    assert REPO in listing.text and OTHER not in listing.text
    queue = review.get(f"/review/{REPO}")
    assert queue.status_code == 200 and "#42" in queue.text
    assert "otherdist" not in queue.text  # nothing of one repository on another's page
    # The other repository's pages and actions answer as if it did not exist.
    assert review.get(f"/review/{OTHER}").status_code == 404
    assert review.get(f"/review/{OTHER}/summary").status_code == 404
    csrf = csrf_of(queue.text)
    other = decision_id(review, OTHER)
    for action in ("post", "correct", "rate"):
        assert review.post(f"/review/{OTHER}/{action}", data={"csrf": csrf, "decision": other, "useful": "1"}
                           ).status_code == 404
        # ... nor through its own repository's URL, naming the other's decision.
        assert review.post(f"/review/{REPO}/{action}", data={"csrf": csrf, "decision": other, "useful": "1"}
                           ).status_code == 404
    assert records.ratings(state_of(review).store, OTHER) == {}
    # The role was read with the user's own token, as GitHub's collaborator permission endpoint answers it.
    asked = [r for r in github.requests if r.path.endswith(f"/collaborators/{ALICE}/permission")]
    assert {r.path.split("/")[3] for r in asked} == {"fastdist", "otherdist"}
    assert all(r.authorization.removeprefix("Bearer ") in github.user_tokens for r in asked)


def test_a_user_without_a_triage_role_sees_no_repository(review: TestClient, github: FakeGitHub) -> None:
    assert sign_in_with_github(review, github, BOB).status_code == 303
    listing = review.get("/review")
    assert 'id="no-repos"' in listing.text and REPO not in listing.text and OTHER not in listing.text
    for repo in (REPO, OTHER):
        assert review.get(f"/review/{repo}").status_code == 404
        assert review.get(f"/review/{repo}/summary").status_code == 404


def test_a_role_taken_away_is_seen_at_the_next_check(app_settings: Settings, github: FakeGitHub,
                                                     private_engine: Engine) -> None:
    with browser(review_settings(app_settings, github, review_recheck_s=0.0), private_engine) as client:
        assert deliver(client, issue_payload(github)).status_code == 202
        wait_idle(client, timeout=300)
        sign_in_with_github(client, github, ALICE)
        assert client.get(f"/review/{REPO}").status_code == 200
        github.repos[REPO].permissions[ALICE] = "read"
        assert client.get(f"/review/{REPO}").status_code == 404


def test_without_a_session_every_page_sends_to_sign_in_and_every_action_is_refused(review: TestClient) -> None:
    for path in ("/review", f"/review/{REPO}", f"/review/{REPO}/summary"):
        answer = review.get(path, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/review/login"
    assert review.post(f"/review/{REPO}/rate", data={"decision": decision_id(review, REPO), "useful": "1"}
                       ).status_code == 403


def test_the_session_cookie_is_httponly_samesite_lax_and_secure_behind_tls(
        app_settings: Settings, github: FakeGitHub, private_engine: Engine) -> None:
    settings = review_settings(app_settings, github)
    for https in (False, True):
        with browser(settings, private_engine, https=https) as client:
            cookie = sign_in_with_github(client, github, ALICE).headers["set-cookie"]
            assert "ddl_triage_review=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
            assert ("Secure" in cookie) is https


def test_a_post_without_the_csrf_token_or_with_another_is_refused(review: TestClient, github: FakeGitHub) -> None:
    sign_in_with_github(review, github, ALICE)
    decision = decision_id(review, REPO)
    for form in ({"decision": decision, "useful": "1"}, {"decision": decision, "useful": "1", "csrf": "forged"}):
        answer = review.post(f"/review/{REPO}/rate", data=form)
        assert answer.status_code == 403 and "CSRF" in answer.text
        assert review.post(f"/review/{REPO}/post", data=form).status_code == 403
    assert records.ratings(state_of(review).store, REPO) == {}
    assert github.bot_comments(REPO, 42) == []


def test_the_ops_token_signs_an_operator_in_to_every_repository(review: TestClient) -> None:
    login = review.get("/review/login")
    wrong = review.post("/review/login/ops", data={"csrf": csrf_of(login.text), "token": "guess"})
    assert wrong.status_code == 403 and review.get("/review", follow_redirects=False).status_code == 303
    # The sign-in form carries its own CSRF token (the sign-in cookie's), so no other site can sign one in.
    assert review.post("/review/login/ops", data={"token": "test-ops-token"}).status_code == 403
    right = review.post("/review/login/ops", data={"csrf": csrf_of(review.get("/review/login").text),
                                                   "token": "test-ops-token"}, follow_redirects=False)
    assert right.status_code == 303
    listing = review.get("/review").text
    assert REPO in listing and OTHER in listing and "operator" in listing


def test_post_puts_one_comment_on_the_issue_however_often_it_is_clicked(review: TestClient,
                                                                        github: FakeGitHub) -> None:
    sign_in_with_github(review, github, ALICE)
    queue = review.get(f"/review/{REPO}", params={"outcome": "shadow"})
    assert 'class="primary post"' in queue.text and github.bot_comments(REPO, 42) == []
    decision = decision_id(review, REPO)
    for _ in range(2):
        answer = review.post(f"/review/{REPO}/post", data={"csrf": csrf_of(queue.text), "decision": decision},
                             follow_redirects=False)
        assert answer.status_code == 303
    wait_idle(review, timeout=300)
    comments = github.bot_comments(REPO, 42)
    stored = records.decision(state_of(review).store, decision)
    assert len(comments) == 1 and stored is not None and stored.posted and stored.approved_by == ALICE
    assert comments[0]["body"] == stored.comment and stored.comment_id == comments[0]["id"]
    assert review.get(f"/review/{REPO}", params={"outcome": "posted"}).text.count('class="card decision"') == 1
    assert review.get(f"/review/{REPO}", params={"outcome": "shadow"}).text.count('class="card decision"') == 0


def test_a_correction_is_stored_and_learned_as_a_triage_command_is_without_a_comment(
        review: TestClient, github: FakeGitHub) -> None:
    sign_in_with_github(review, github, ALICE)
    csrf = csrf_of(review.get(f"/review/{REPO}").text)
    decision = decision_id(review, REPO)
    bad = review.post(f"/review/{REPO}/correct", data={"csrf": csrf, "decision": decision, "axis": "symptom",
                                                       "value": "no-such-symptom"})
    assert bad.status_code == 422 and "not a symptom value" in bad.text
    good = review.post(f"/review/{REPO}/correct", data={"csrf": csrf, "decision": decision, "axis": "symptom",
                                                        "value": "out_of_memory"}, follow_redirects=False)
    assert good.status_code == 303
    store = state_of(review).store
    assert store.corrections(REPO, 42) == {"symptom": "out_of_memory"}
    cases = feedback_cases(store.feedback_cases(repo=REPO), state_of(review).settings.github_api_url)
    assert [(c.id, c.labels, c.title) for c in cases] == [
        (f"{REPO}#42", {"symptom": "out_of_memory"}, "Training hangs with NCCL watchdog timeout on two nodes")]
    assert github.writes() == []  # nothing public: no comment, no label
    assert "corrected to <b>out_of_memory</b>" in review.get(f"/review/{REPO}").text
    summary = review.get(f"/review/{REPO}/summary").text
    assert "<td>symptom</td><td>1</td><td>1</td><td>100%</td>" in summary


def test_useful_ratings_are_stored_per_person_and_counted_in_the_summary(review: TestClient,
                                                                         github: FakeGitHub) -> None:
    sign_in_with_github(review, github, ALICE)
    csrf = csrf_of(review.get(f"/review/{REPO}").text)
    decision = decision_id(review, REPO)
    review.post(f"/review/{REPO}/post", data={"csrf": csrf, "decision": decision})
    wait_idle(review, timeout=300)
    for useful in ("0", "1"):  # a person's later rating replaces their earlier one
        assert review.post(f"/review/{REPO}/rate", data={"csrf": csrf, "decision": decision, "useful": useful},
                           follow_redirects=False).status_code == 303
    rating = records.ratings(state_of(review).store, REPO)[decision]
    assert (rating.useful, rating.not_useful) == (1, 0)
    summary = review.get(f"/review/{REPO}/summary").text
    assert "1 of 1 rated (100%)" in summary and "<td>1 (100%)</td>" in summary


def test_the_queue_filters_by_outcome_and_by_axis_value(review: TestClient, github: FakeGitHub) -> None:
    sign_in_with_github(review, github, ALICE)
    stored = state_of(review).store.decisions(10, REPO)[0]
    shown = next(axis for axis, p in stored.predictions.items() if p.get("label"))
    label = str(stored.predictions[shown]["label"])
    count = lambda **query: review.get(f"/review/{REPO}", params=query).text.count('class="card decision"')  # noqa: E731
    assert count() == 1 and count(outcome="shadow") == 1 and count(outcome="posted") == 0
    assert count(outcome="silent") == 0 and count(axis=shown, value=label) == 1
    assert count(axis=shown, value=label + "-not") == 0


def test_the_comment_is_rendered_as_markdown_and_sanitised() -> None:
    html = render_markdown("<!-- ddl-triage v1 -->\n**bold** <sub>small</sub> <script>alert(1)</script> "
                           "[x](javascript:alert(1)) <a href='javascript:alert(2)'>y</a> <img src=x onerror=alert(3)> "
                           "[ok](https://github.com/o/r/issues/1)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "<strong>bold</strong>" in html and "<sub>small</sub>" in html and "<table>" in html
    assert '<a href="https://github.com/o/r/issues/1" rel="noopener noreferrer nofollow">ok</a>' in html
    assert "<script" not in html and "alert(1)</" not in html and 'href="javascript' not in html
    assert "onerror" not in html and "<!--" not in html
