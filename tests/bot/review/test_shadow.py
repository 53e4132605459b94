"""Shadow mode measures: a reviewer's accepts and corrections of the bot's unwritten labels are verdicts, and
they count in `issue-sorter stats`, on the quality page and in the review page's tabs."""

from __future__ import annotations

import pytest

from bot.decisions.stats import format_table, live_stats
from core.db import session_scope
from tests.bot.conftest import REPO, run_worker
from tests.bot.review.conftest import seed, sign_in
from tests.bot.review.test_pages import decision, review

pytestmark = pytest.mark.redis
PAGE = f"/review/{REPO}"


@pytest.fixture
def shadowed(sessions, review_github):
    """Three issues the bot classified in shadow mode: two it would have labelled, one it would not."""
    return {"accept": seed(sessions, review_github, 1, "Crash on save", outcome="shadow", label="bug"),
            "relabel": seed(sessions, review_github, 2, "Crash on load", outcome="shadow", label="bug"),
            "unsure": seed(sessions, review_github, 3, "Hmm", outcome="shadow", label=None,
                           scores={"question": 0.4, "bug": 0.35, "feature": 0.25})}


def text(client, path: str) -> str:
    return " ".join(client.get(path).get_data(as_text=True).split())


def test_shadow_mode_accepts_and_corrections_count_in_stats_the_quality_page_and_the_tabs(
        client, review_github, shadowed, sessions, bare_context, redis):
    """Accepting one suggestion and relabelling another wrote both labels on GitHub, yet neither became a
    verdict: Corrected showed 0 decisions, the quality page judged 0, `issue-sorter stats` was all zeros."""
    sign_in(client, review_github, "maintainer")
    waiting = text(client, PAGE)
    assert 'id="shadow-mode"' in waiting and "<em>Accept</em> writes that label on the issue" in waiting
    review(client, shadowed["accept"].prediction_id, "accept")
    review(client, shadowed["relabel"].prediction_id, "relabel", "question")
    run_worker(redis)
    assert review_github.issue_labels(REPO, 1) == ["bug"]
    assert review_github.issue_labels(REPO, 2) == ["question"]
    assert decision(sessions, shadowed["accept"].prediction_id) == ("accepted", "bug", "maintainer")
    assert decision(sessions, shadowed["relabel"].prediction_id) == ("corrected", "question", "maintainer")

    with session_scope(sessions) as session:
        counts = live_stats(session, REPO)[REPO]["all"]
        table = format_table(live_stats(session, REPO))
    assert (counts["suggestions"], counts["accepted"], counts["corrected"], counts["judged"]) == (2, 1, 1, 2)
    assert (counts["abstained"], counts["not_written"], counts["live_precision"]) == (1, 2, 0.5)
    assert "50 % of 2" in table

    corrected = text(client, f"{PAGE}?filter=corrected")
    assert "Crash on load" in corrected and "Crash on save" not in corrected and "1 decision," in corrected
    everything = text(client, f"{PAGE}?filter=all")
    assert '<span class="tag accepted">accepted</span>' in everything
    assert '<span class="tag corrected">corrected</span>' in everything
    assert "Crash on save" not in text(client, PAGE)  # judged: no longer waiting; "Hmm" still waits
    assert "Hmm" in text(client, PAGE)

    quality = text(client, f"{PAGE}/quality")
    assert 'id="shadow-mode"' in quality and "Would-have-been precision" in quality
    assert '<td>3</td><td>2</td><td>67%</td> <td>2</td><td>1</td> <td class="precision">50 % of 2' in quality


def test_a_repository_that_left_shadow_mode_no_longer_says_so(client, review_github, shadowed, sessions):
    seed(sessions, review_github, 4, "Newer, labelled", outcome="applied", label="bug")
    sign_in(client, review_github, "maintainer")
    assert 'id="shadow-mode"' not in text(client, PAGE)
    assert 'id="shadow-mode"' not in text(client, f"{PAGE}/quality")
