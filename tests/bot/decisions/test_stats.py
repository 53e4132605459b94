"""Live quality: counts and live precision of the bot's suggestions, from decisions maintainers made."""

import datetime as dt

import pytest

from bot.decisions.stats import format_precision, format_table, live_stats
from core import store
from core.db import session_scope
from core.tables import Prediction
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker

NOW = dt.datetime(2025, 6, 30, 12, 0, tzinfo=dt.timezone.utc)
OTHER_REPO = "Codertocat/Space"
ISSUES = {
    1: ("App crashes with TypeError when saving", "Steps to reproduce: click save. Traceback: TypeError ..."),
    2: ("Add dark mode to the settings page", "It would be great to have a dark theme option."),
    3: ("How do I configure the proxy?", "I could not find in the docs how to set a proxy. Any hints?"),
    4: ("Segfault when the file is empty", "Opening an empty file kills the process."),
}
KNOWN = ("bug", "enhancement", "question")


def counts(suggestions=0, accepted=0, rejected=0, corrected=0, abstained=0, awaiting_review=0, precision=None,
           not_written=0):
    return {"suggestions": suggestions, "accepted": accepted, "rejected": rejected, "corrected": corrected,
            "abstained": abstained, "awaiting_review": awaiting_review, "judged": accepted + rejected + corrected,
            "live_precision": precision, "not_written": not_written}


@pytest.mark.redis
@pytest.mark.slow
def test_decisions_made_through_the_pipeline_give_the_live_precision(worker_context, fake_github, client, payload,
                                                                     redis):
    for number, (title, body) in ISSUES.items():
        fake_github.add_issue(REPO, number, title, body)
        opened = issue_payload(payload, "opened", number, title=title, body=body)
        deliver(client, "issues", opened, f"d-open-{number}")
    run_worker(redis)
    ours = {number: fake_github.issue_labels(REPO, number)[0] for number in ISSUES}
    other = next(label for label in KNOWN if label != ours[3])

    def send(action, number, delivery, labels, label=None):
        title, body = ISSUES[number]
        deliver(client, "issues", issue_payload(payload, action, number, title=title, body=body, labels=labels,
                                                label=label, sender="maintainer"), delivery)

    send("closed", 1, "d-1", [ours[1]])  # accepted
    send("unlabeled", 2, "d-2", [], ours[2])  # rejected
    send("unlabeled", 3, "d-3a", [], ours[3])  # corrected
    send("labeled", 3, "d-3b", [other], other)
    run_worker(redis)  # issue 4 awaits review
    expected = counts(suggestions=4, accepted=1, rejected=1, corrected=1, awaiting_review=1, precision=1 / 3)
    with session_scope(worker_context.sessionmaker) as session:
        assert live_stats(session) == {REPO: {"all": expected, "last_30_days": expected}}
        assert live_stats(session, OTHER_REPO) == {}


def add_prediction(session, repo: str, number: int, *, days_ago: int, outcome: str = "applied",
                   decision: str | None = None) -> None:
    repository = store.ensure_repository(session, repo)
    issue, _ = store.upsert_issue(session, repository, number, title="t", body="b", author_login="a", state="open")
    session.add(Prediction(issue_id=issue.id, scores={"bug": 0.9}, predicted="bug",
                           label=None if outcome == "abstained" else "bug", applied=outcome == "applied",
                           outcome=outcome, decision=decision, created_at=NOW - dt.timedelta(days=days_ago)))


@pytest.fixture
def history(sessions):
    """Two repositories: old decisions (40 days ago) and recent ones (5 days ago)."""
    with session_scope(sessions) as session:
        for number, (days, outcome, decision) in enumerate([
                (40, "applied", "accepted"), (40, "applied", "accepted"), (40, "applied", "rejected"),
                (40, "abstained", None), (5, "applied", "accepted"), (5, "applied", "corrected"),
                (5, "applied", None), (5, "suggested", None), (5, "dry_run", None)], start=1):
            add_prediction(session, REPO, number, days_ago=days, outcome=outcome, decision=decision)
        add_prediction(session, OTHER_REPO, 1, days_ago=1, decision="rejected")
    return sessions


def test_counts_and_live_precision_overall_and_in_the_last_30_days(history):
    with session_scope(history) as session:
        stats = live_stats(session, now=NOW)
    assert list(stats) == [REPO, OTHER_REPO]  # sorted by name
    assert stats[REPO] == {
        "all": counts(suggestions=7, accepted=3, rejected=1, corrected=1, abstained=1, awaiting_review=2,
                      precision=3 / 5, not_written=1),
        "last_30_days": counts(suggestions=4, accepted=1, corrected=1, awaiting_review=2, precision=1 / 2,
                               not_written=1)}
    assert stats[OTHER_REPO]["all"] == stats[OTHER_REPO]["last_30_days"] == counts(suggestions=1, rejected=1,
                                                                                   precision=0.0)


def test_the_repository_filter_keeps_only_that_repository(history):
    with session_scope(history) as session:
        assert list(live_stats(session, OTHER_REPO, now=NOW)) == [OTHER_REPO]
        assert live_stats(session, "nobody/nothing", now=NOW) == {}


def test_the_window_is_measured_from_now(history):
    with session_scope(history) as session:
        later = live_stats(session, REPO, now=NOW + dt.timedelta(days=60))
    assert later[REPO]["last_30_days"] == counts()


def test_a_decision_on_a_label_the_bot_chose_without_writing_it_counts(sessions):
    """Shadow mode exists to judge the bot before it writes: its accepts and corrections were left out of
    every count, so `issue-sorter stats` stayed at zero however many a maintainer made. A dry run's label
    and an abstention are still no decision on the bot."""
    with session_scope(sessions) as session:
        add_prediction(session, REPO, 1, days_ago=1, outcome="suggested", decision="accepted")
        add_prediction(session, REPO, 2, days_ago=1, outcome="shadow", decision="accepted")
        add_prediction(session, REPO, 3, days_ago=1, outcome="shadow", decision="corrected")
        add_prediction(session, REPO, 4, days_ago=1, outcome="shadow")
        add_prediction(session, REPO, 5, days_ago=1, outcome="dry_run", decision="accepted")
        add_prediction(session, REPO, 6, days_ago=1, outcome="abstained", decision="corrected")
        assert live_stats(session, now=NOW)[REPO]["all"] == counts(
            suggestions=4, accepted=2, corrected=1, abstained=1, awaiting_review=1, precision=2 / 3,
            not_written=4)


def test_the_table_has_one_line_per_repository_and_window_and_a_dash_without_decisions(history):
    with session_scope(history) as session:
        table = format_table(live_stats(session, now=NOW))
    lines = table.splitlines()
    assert len(lines) == 2 + 4
    assert lines[2].split() == [REPO, "all", "7", "1", "3", "1", "1", "1", "60", "%", "of", "5"]
    with session_scope(history) as session:
        session.query(Prediction).update({"decision": None})
        assert format_table(live_stats(session, now=NOW)).splitlines()[2].split()[-1] == "-"


def test_a_precision_says_how_many_decisions_it_is_of():
    assert format_precision(0.0, 3) == "0 % of 3"
    assert format_precision(2 / 3, 3) == "67 % of 3"
    assert format_precision(None, 0) == "-"
