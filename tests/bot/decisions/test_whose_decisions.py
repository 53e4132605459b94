"""Whose decisions teach the App: a sender who may triage the repository (triage, write, maintain, admin), asked
of GitHub once per login within the cache window. Anyone else's event is history: no training label, no memory
row, no own-label example, no verdict. And what was learnt is the text that was judged.

The rules on the fakes (tests/bot/rules.py: the labelling job, then the feedback job's gather, decide, record);
the permission cache and the abstain label's removal through the webhook, Redis, a real RQ worker and the fake
GitHub over HTTP.
"""

import dataclasses

import pytest
from sqlalchemy import func, select

from bot.decisions import act, gather
from bot.decisions.decide import decide_event
from bot.decisions.gather import Actor, DecisionInputs, PredictionState
from bot.github_api.cache import PERMISSION_KEY
from core import store
from core.db import session_scope
from core.settings import Settings
from core.tables import IssueRecord, MemoryEntry, OwnLabelExample, Prediction
from tests.bot.conftest import REPO as HTTP_REPO
from tests.bot.conftest import deliver, issue_payload, run_worker
from tests.bot.rules import REPO, event, issue_row, label, label_events, record, stored_issue
from tests.fakes import FakeEncoder
from trainer.dataset import load_database

ENCODER = FakeEncoder({"crash": "bug", "please add": "feature"})


def taught(sessions, number: int = 1) -> tuple:
    """(training label, the prediction's decision, own-label examples, memory rows) of issue `number`."""
    with session_scope(sessions) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()
        prediction = store.latest_prediction(session, issue)
        examples = session.scalar(select(func.count()).where(OwnLabelExample.issue_id == issue.id))
        rows = session.scalar(select(func.count()).where(MemoryEntry.issue_id == issue.id))
        return issue.confirmed_label, prediction.decision if prediction else None, examples, rows


def test_the_authors_close_teaches_nothing(sessions, github):
    """On GitHub an issue's author may close it: that used to accept the bot's label as training data."""
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    outcome = record(sessions, event("closed", 1, labels=["bug", "area: ui"], sender="reporter"), embedder=ENCODER)
    assert outcome == "not a decision: reporter may not triage this repository; recorded as history"
    assert taught(sessions) == (None, None, 0, 0)
    assert label_events(sessions)[-1] == ("closed", None, "reporter", True, False)  # kept as history
    assert stored_issue(sessions, 1).state == "closed"


@pytest.mark.parametrize("login", ["helper", "writer", "maintainer", "boss"])  # triage, write, maintain, admin
def test_a_triagers_close_accepts(sessions, github, login):
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    assert record(sessions, event("closed", 1, labels=["bug"], sender=login), embedder=ENCODER) == "accepted: 'bug'"
    assert taught(sessions) == ("bug", "accepted", 0, 1)
    assert stored_issue(sessions, 1).confirmed_by == login


def test_a_template_label_at_creation_teaches_nothing(sessions):
    """An issue template's labels arrive as the author's `labeled` events: the author chose a form, no kind."""
    for name in ("bug", "area: ui"):
        outcome = record(sessions, event("labeled", 1, labels=["bug", "area: ui"], label=name, sender="reporter"),
                         embedder=ENCODER)
        assert outcome.startswith("not a decision: reporter may not triage")
    assert taught(sessions) == (None, None, 0, 0)


@pytest.mark.parametrize("login", ["reader", "passer-by"])
def test_a_drive_by_label_change_teaches_nothing(sessions, github, login):
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    record(sessions, event("unlabeled", 1, labels=["question"], label="bug", sender=login))
    record(sessions, event("labeled", 1, labels=["question"], label="question", sender=login))
    assert taught(sessions) == (None, None, 0, 0)


def test_the_permission_is_asked_only_where_an_event_can_teach(sessions, github):
    asked = []
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    record(sessions, event("labeled", 1, labels=["bug"], label="bug", sender="issue-sorter[bot]", is_bot=True),
           asked=asked)
    record(sessions, event("reopened", 1, labels=["bug"], sender="reporter"), asked=asked)
    record(sessions, event("edited", 1, labels=["bug"], sender="reporter", title="App crash on save!"), asked=asked)
    assert asked == []  # a bot, a reopening, an edit of an issue nobody confirmed: nothing to decide
    record(sessions, event("closed", 1, labels=["bug"], sender="helper"), asked=asked)
    record(sessions, event("edited", 1, labels=["bug"], sender="reporter", title="Edited after", delivery="e-2"),
           asked=asked)
    assert asked == [(REPO, "helper"), (REPO, "reporter")]  # a close; an edit of a confirmed issue


def test_the_authors_edit_after_a_confirmation_leaves_what_retraining_reads(sessions):
    """"App crashes on save", confirmed `bug` by a maintainer, edited by its author into "Please add dark
    mode": retraining, the memory and the own-label fits must keep reading what the maintainer judged."""
    record(sessions, event("labeled", 1, labels=["bug"], label="bug", title="App crashes on save",
                           body="Traceback ..."), embedder=ENCODER)
    assert taught(sessions)[0] == "bug"
    record(sessions, event("edited", 1, labels=["bug"], sender="reporter", title="Please add dark mode", body=""),
           embedder=ENCODER)
    with session_scope(sessions) as session:
        (example,) = load_database(session)
    assert (example.title, example.body, example.label) == ("App crashes on save", "Traceback ...", "bug")
    assert taught(sessions)[0] == "bug"


def test_a_maintainers_own_edit_keeps_the_confirmation_and_the_new_text(sessions):
    record(sessions, event("labeled", 1, labels=["bug"], label="bug", title="App crashes on save"))
    record(sessions, event("edited", 1, labels=["bug"], sender="helper", title="App crashes on save (Windows)"))
    with session_scope(sessions) as session:
        (example,) = load_database(session)
    assert (example.title, example.label) == ("App crashes on save (Windows)", "bug")


def test_before_any_confirmation_the_authors_edits_are_the_text(sessions, github):
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    record(sessions, event("edited", 1, labels=["bug"], sender="reporter", title="App crash on save, with logs"))
    assert issue_row(sessions, 1)[2] == "App crash on save, with logs"
    record(sessions, event("closed", 1, labels=["bug"], title="App crash on save, with logs"))
    with session_scope(sessions) as session:
        (example,) = load_database(session)
    assert (example.title, example.label) == ("App crash on save, with logs", "bug")


def test_dry_run_cannot_ask_so_nothing_teaches(sessions, github):
    """Without App credentials the sender's role cannot be asked of GitHub: every event is history."""
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    with session_scope(sessions) as session:
        gathered = gather.gather_event(session, event("closed", 1, labels=["bug"]), gather.Sources("issue-sorter[bot]", 1,
                                                                                              None))
        outcome = act.record(session, gathered, decide_event(gathered.inputs)).outcome
    assert outcome.startswith("not a decision: maintainer's permission could not be asked")
    assert taught(sessions) == (None, None, 0, 0)


# ---- the abstain label leaves when a maintainer decides ------------------------------------------------

def inputs(mark: str | None = "needs-triage", **fields) -> DecisionInputs:
    prediction = PredictionState(7, None, False, "abstained", None, mark, ())
    return dataclasses.replace(DecisionInputs(
        "labeled", "bug", Actor("maintainer", True, False, may_triage=True), ("needs-triage", "bug"),
        ("bug", "feature", "question"), None, prediction), **fields)


def test_a_maintainers_kind_label_takes_the_abstain_mark_off():
    assert decide_event(inputs()).take_off == "needs-triage"
    assert decide_event(inputs(action="typed", label="Bug", current_labels=("needs-triage", "Bug"))).take_off == \
        "needs-triage"  # an issue type decides the kind too


@pytest.mark.parametrize("changed", [
    {"label": "good first issue", "current_labels": ("needs-triage", "good first issue")},  # no kind
    {"current_labels": ("bug",)},  # the mark is off already
    {"sender": Actor("reporter", True, False, may_triage=False)},  # not a maintainer
    {"action": "unlabeled", "current_labels": ("needs-triage",)},
])
def test_the_mark_stays_for_anything_but_a_maintainers_kind(changed):
    assert decide_event(inputs(**changed)).take_off is None


def test_a_repository_that_keeps_its_abstain_label_records_no_mark(sessions, github):
    settings = Settings(webhook_secret="s", threshold=0.99, abstain_label="needs-triage")
    assert label(sessions, github, 1, settings=settings)[0] == "abstained"
    assert label(sessions, github, 2, settings=settings, config="remove_abstain_label: false")[0] == "abstained"
    with session_scope(sessions) as session:
        marks = [p.abstain_mark for p in session.scalars(select(Prediction).order_by(Prediction.id))]
    assert marks == ["needs-triage", None] and ("add_labels", REPO, 2, ("needs-triage",)) in github.writes()


@pytest.mark.redis
def test_a_maintainers_label_on_an_abstention_takes_the_mark_off_github(bare_context, fake_github, client, payload,
                                                                         redis):
    fake_github.add_issue(HTTP_REPO, 1, "Weird thing", "hm", labels=["needs-triage"])
    with session_scope(bare_context.sessionmaker) as session:
        repository = store.ensure_repository(session, HTTP_REPO, 1)
        issue, _ = store.upsert_issue(session, repository, 1, title="Weird thing", body="hm", author_login="octocat",
                                      state="open")
        session.add(Prediction(issue_id=issue.id, scores={}, outcome="abstained", abstain_mark="needs-triage"))
    labelled = issue_payload(payload, "labeled", 1, title="Weird thing", labels=["needs-triage", "bug"], label="bug")
    assert deliver(client, "issues", labelled, "d-labelled").status_code == 202
    run_worker(redis)
    assert "needs-triage" not in fake_github.issue_labels(HTTP_REPO, 1)
    assert len(fake_github.calls("DELETE", rf"/repos/{HTTP_REPO}/issues/1/labels/needs-triage")) == 1
    with session_scope(bare_context.sessionmaker) as session:
        assert session.scalars(select(Prediction.abstain_mark)).one() is None  # recorded: nothing left to take off


# ---- the permission, asked once per login in the cache window --------------------------------------------

@pytest.mark.redis
def test_the_permission_is_asked_once_per_login_within_the_cache_window(bare_context, fake_github, client, payload,
                                                                         redis):
    fake_github.add_issue(HTTP_REPO, 1, "App crashes", "", labels=["bug"])
    for n, (action, login) in enumerate([("labeled", "maintainer"), ("unlabeled", "maintainer"),
                                         ("labeled", "maintainer"), ("closed", "reader")]):
        data = issue_payload(payload, action, 1, title="App crashes", labels=["bug"], label="bug", sender=login)
        assert deliver(client, "issues", data, f"d-{n}").status_code == 202
    run_worker(redis)

    def asked(login: str) -> int:
        return len(fake_github.calls("GET", rf"/repos/{HTTP_REPO}/collaborators/{login}/permission"))

    assert (asked("maintainer"), asked("reader")) == (1, 1)
    window = bare_context.settings.permission_cache_seconds
    assert 0 < redis.ttl(PERMISSION_KEY.format(HTTP_REPO.lower(), "maintainer")) <= window
    redis.delete(PERMISSION_KEY.format(HTTP_REPO.lower(), "maintainer"))  # the window has passed
    data = issue_payload(payload, "unlabeled", 1, title="App crashes", labels=[], label="bug")
    deliver(client, "issues", data, "d-later")
    run_worker(redis)
    assert asked("maintainer") == 2
