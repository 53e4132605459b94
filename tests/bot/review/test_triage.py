"""Triage many at once and on any screen, through the test client: filters by
label, outcome and score, least confident first, borderline marked, several accepted in one post (one job
each), answers in JSON for the page's script, GitHub's permission names, one time format, accessible names."""

from __future__ import annotations

import re

import pytest

from tests.bot.conftest import REPO, run_worker
from tests.bot.review.conftest import csrf_token, seed, sign_in

PAGE = f"/review/{REPO}"


@pytest.fixture
def seeded(sessions, review_github):
    return {"sure": seed(sessions, review_github, 1, "Crash on save", outcome="suggested", label="bug",
                         scores={"bug": 0.92, "feature": 0.05, "question": 0.03}, threshold=0.5),
            "edge": seed(sessions, review_github, 2, "Crash sometimes", outcome="suggested", label="bug",
                         scores={"bug": 0.55, "feature": 0.3, "question": 0.15}, threshold=0.5),
            "feature": seed(sessions, review_github, 3, "Add dark mode", outcome="suggested",
                            label="enhancement",
                            scores={"feature": 0.75, "bug": 0.15, "question": 0.1}, threshold=0.5),
            "unsure": seed(sessions, review_github, 4, "How to run?", outcome="abstained", label=None,
                           scores={"question": 0.41, "docs": 0.33, "bug": 0.26}, threshold=0.5,
                           reason="top score 0.41 (question) is below 0.50")}


def row_of(page: str, prediction_id: int) -> str:
    """The HTML of one row of the list (its why-this-label panel included)."""
    return page.split(f'id="prediction-{prediction_id}"', 1)[1].split('<tr id="prediction-', 1)[0]


def numbers(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'class="title" href="[^"]*/issues/(\d+)"', page)]


def test_least_confident_first_and_the_filters(client, review_github, seeded):
    sign_in(client, review_github, "helper")
    assert numbers(client.get(PAGE).get_data(as_text=True)) == [4, 3, 2, 1]  # newest first
    assert numbers(client.get(f"{PAGE}?sort=confidence").get_data(as_text=True)) == [4, 2, 3, 1]
    assert numbers(client.get(f"{PAGE}?label=bug").get_data(as_text=True)) == [2, 1]
    assert numbers(client.get(f"{PAGE}?outcome=abstained").get_data(as_text=True)) == [4]
    assert numbers(client.get(f"{PAGE}?min_score=0.5&max_score=0.8&sort=confidence")
                   .get_data(as_text=True)) == [2, 3]
    paged = client.get(f"{PAGE}?label=bug&sort=confidence").get_data(as_text=True)
    assert f'href="{PAGE}?filter=all&amp;label=bug&amp;sort=confidence"' in paged  # the tabs keep the view
    for bad in ("sort=loudest", "outcome=nope", "min_score=2", "max_score=x"):
        response = client.get(f"{PAGE}?{bad}")
        assert response.status_code == 400 and "<h1>Bad Request</h1>" in response.get_data(as_text=True), bad


def test_a_label_just_above_its_threshold_is_marked_borderline(client, review_github, seeded):
    sign_in(client, review_github, "helper")
    page = client.get(PAGE).get_data(as_text=True)
    rows = {n: row_of(page, seeded[n].prediction_id) for n in seeded}
    assert "tag borderline" in rows["edge"]
    assert all("tag borderline" not in rows[n] for n in ("sure", "feature", "unsure"))


def test_several_accepted_at_once_are_one_review_job_each(client, review_github, seeded, redis, bare_context,
                                                         sessions):
    sign_in(client, review_github, "helper")
    chosen = [seeded["sure"].prediction_id, seeded["feature"].prediction_id, seeded["unsure"].prediction_id]
    response = client.post(f"{PAGE}/predictions/accept", headers={"Accept": "application/json"},
                           data={"csrf_token": csrf_token(client), "prediction_id": chosen})
    results = response.get_json()["results"]
    assert [(r["number"], r["queued"]) for r in results] == [(1, True), (3, True), (4, False)]
    assert results[2]["message"] == "The bot chose no label on #4; pick one instead."
    assert results[0]["state"] == "accept by helper"
    assert redis.llen("rq:queue:feedback") == 2
    again = client.post(f"{PAGE}/predictions/accept", data={
        "csrf_token": csrf_token(client), "prediction_id": chosen[:1], "back": f"{PAGE}?sort=confidence"})
    assert again.status_code == 303 and again.headers["Location"].endswith(
        f"{PAGE}?sort=confidence#prediction-{chosen[0]}")  # a form without script: back to its row
    assert redis.llen("rq:queue:feedback") == 2  # queued already: nothing more
    run_worker(redis)
    assert review_github.issue_labels(REPO, 1) == ["bug"]
    assert review_github.issue_labels(REPO, 3) == ["enhancement"]
    nothing = client.post(f"{PAGE}/predictions/accept", data={"csrf_token": csrf_token(client)})
    assert nothing.status_code == 400


def test_a_single_click_answers_json_to_the_script_and_a_redirect_to_its_row_otherwise(client, review_github,
                                                                                      seeded, redis):
    sign_in(client, review_github, "helper")
    edge = seeded["edge"].prediction_id
    answer = client.post(f"{PAGE}/predictions/{edge}", headers={"Accept": "application/json"},
                         data={"csrf_token": csrf_token(client), "choice": "reject"})
    assert answer.get_json() == {"results": [{"prediction_id": edge, "number": 2, "queued": True,
                                              "subject": "kind", "state": "reject by helper",
                                              "message": "Queued: reject on #2."}]}
    sure = seeded["sure"].prediction_id
    plain = client.post(f"{PAGE}/predictions/{sure}", data={
        "csrf_token": csrf_token(client), "choice": "accept", "back": "//evil.example/x"})
    assert plain.headers["Location"].endswith(f"{PAGE}?filter=waiting&page=1#prediction-{sure}")


def test_permissions_times_and_accessible_names(client, review_github, seeded):
    sign_in(client, review_github, "helper")
    index = client.get("/review/").get_data(as_text=True)
    assert '<td class="permission">Triage</td>' in index
    page = client.get(PAGE).get_data(as_text=True)
    when = r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d UTC">just now</time>'
    assert re.search(when, page)
    assert f'<a href="{PAGE}?filter=waiting" class="on"\n     aria-current="page">' in page
    assert page.count('aria-current="page"') == 1
    assert 'aria-label="Accept bug on #1"' in page and 'aria-label="Accept bug on #2"' in page
    assert 'aria-label="Reject bug on #1"' in page and 'aria-label="Another label for #4"' in page
    abstention = row_of(page, seeded["unsure"].prediction_id)
    assert "<option selected>question</option>" in abstention  # the bot's top guess, preselected
    assert page.count("<option selected>") == 1


def test_write_is_githubs_name_for_push(client, review_github, seeded):
    from bot.review.display import permission

    assert [permission(role) for role in ("admin", "maintain", "push", "triage", "pull")] == \
        ["Admin", "Maintain", "Write", "Triage", "Read"]
