"""The labelling and feedback rules on SQLite, with a FakeClassifier and an in-memory GitHub: no Redis,
no torch, no HTTP. The same rules run end to end in test_jobs.py and test_feedback.py."""

import dataclasses
import datetime as dt

import pytest
from sqlalchemy import select

from bot import feedback, labeling, labeling_inputs, labeling_writes
from bot.events import IssueEvent
from bot.issues import IssueSnapshot
from bot.repo_config import CONFIG_PATH, parse_config
from core import store
from core.db import session_scope
from core.settings import Settings
from core.tables import IssueRecord, LabelEvent, Prediction
from tests.fakes import FakeClassifier, FakeGitHub

REPO = "octo/widgets"
LABELS = ["bug", "enhancement", "question", "documentation"]
SETTINGS = Settings(webhook_secret="s", threshold=0.5)
CLASSIFIER = FakeClassifier({"crash": "bug", "please add": "feature", "how do i": "question"})
ISSUES = {1: ("App crash on save", "Traceback ..."), 2: ("Please add dark mode", ""), 3: ("Hello", "hm")}


@pytest.fixture
def github():
    return FakeGitHub(labels={REPO: list(LABELS)})


def snapshot(number: int, **fields) -> IssueSnapshot:
    title, body = ISSUES[number]
    return dataclasses.replace(IssueSnapshot(number, title, body, "open", (), False, "reporter", None), **fields)


def opened(number: int, **fields) -> dict:
    """An `issues.opened` job's arguments, its copy of the issue fresh (so nothing is read again)."""
    issue = snapshot(number, updated_at=dt.datetime.now(dt.UTC), **fields)
    return IssueEvent(delivery_id=f"d-{number}", action="opened", installation_id=1, repo=REPO, number=number,
                      sender_login="reporter", sender_is_bot=False, snapshot=issue).job_kwargs()


def run_job(sessions, github, number: int, *, classifier=CLASSIFIER, settings=SETTINGS, checkpoint=False,
            claimed: set | None = None, **fields):
    """What bot.jobs does for `issues.opened`: gather, decide, carry out, in one session."""
    with session_scope(sessions) as session:
        gathered = labeling_inputs.gather(session, opened(number, **fields),
                                          labeling_inputs.Sources(settings, github, lambda repo: classifier))
        if isinstance(gathered, str):
            return gathered
        claimed = set() if claimed is None else claimed
        return labeling_writes.carry_out(session, gathered, labeling.decide(gathered.inputs), github,
                                         delivery_id=f"d-{number}",
                                         claim=lambda key: key not in claimed and not claimed.add(key),
                                         checkpoint=session.commit if checkpoint else lambda: None)


def label(sessions, github, number: int, *, config: str | None = None, classifier=CLASSIFIER, dry_run=False,
          settings=SETTINGS, **fields):
    if config is not None:
        assert parse_config(config)[1] == []
        github.files[(REPO, CONFIG_PATH)] = config
    result = run_job(sessions, None if dry_run else github, number, classifier=classifier, settings=settings,
                     **fields)
    return result if isinstance(result, str) else (result.outcome, result.label, result.reason)


def test_a_confident_prediction_becomes_the_repositorys_label_in_one_write(sessions, github):
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))]
    assert label(sessions, github, 2)[:2] == ("applied", "enhancement")  # feature is "enhancement" here


def test_below_the_threshold_the_bot_abstains_stores_why_and_writes_nothing(sessions, github):
    outcome, chosen, reason = label(sessions, github, 3)  # no keyword: a third for each kind
    assert (outcome, chosen) == ("abstained", None) and "below 0.50" in reason
    assert github.writes() == []
    with session_scope(sessions) as session:
        assert session.scalars(select(Prediction.outcome)).all() == ["abstained"]


def test_a_label_outside_the_allowlist_is_never_applied(sessions, github):
    outcome, _, reason = label(sessions, github, 1, config='allow: ["enhancement"]')
    assert outcome == "abstained" and "allowlist" in reason and github.writes() == []


def test_suggest_mode_comments_with_the_scores_and_labels_nothing(sessions, github):
    assert label(sessions, github, 1, config="mode: suggest")[0] == "suggested"
    ((action, repo, number, body),) = github.writes()
    assert action == "create_comment" and "`bug`: 90%" in body


def test_shadow_mode_classifies_and_records_every_issue_and_writes_nothing(sessions, github):
    assert label(sessions, github, 1, config="mode: shadow")[:2] == ("shadow", "bug")
    assert label(sessions, github, 3, config="mode: shadow")[0] == "shadow"  # below the threshold too
    assert github.writes() == []
    with session_scope(sessions) as session:
        assert session.scalars(select(Prediction.applied)).all() == [False, False]


def test_comment_mode_labels_and_explains_with_the_repositorys_template(sessions, github):
    label(sessions, github, 1, config='mode: comment\ncomment_template: "Sorted as {label} ({score:.0%})"')
    assert [call[0] for call in github.writes()] == ["add_labels", "create_comment"]
    assert github.writes()[1][3] == "Sorted as `bug` (90%)"  # label names in code spans ping nobody


def test_the_configured_label_name_wins_over_name_matching(sessions, github):
    github.labels[REPO].append("type: crash")
    assert label(sessions, github, 1, config='labels: {bug: "type: crash"}')[1] == "type: crash"


def test_a_missing_kind_label_is_created_only_when_allowed(sessions, github):
    github.labels[REPO] = ["question"]
    assert label(sessions, github, 1)[0] == "abstained"
    creating = dataclasses.replace(SETTINGS, create_labels=True)
    label(sessions, github, 2, settings=creating)
    assert ("create_label", REPO, "feature") in github.calls and github.issue_labels[(REPO, 2)] == ["feature"]


def test_an_issue_handled_once_is_not_labelled_again(sessions, github):
    label(sessions, github, 1)
    assert label(sessions, github, 1) == "it was already handled"
    assert len(github.writes()) == 1


@pytest.mark.parametrize("fields,reason", [({"state": "closed"}, "closed"), ({"is_pull_request": True}, "pull"),
                                           ({"labels": ("bug",)}, "already carries"),
                                           ({"author_login": "dependabot[bot]"}, "skip_authors")])
def test_issues_to_leave_alone_are_not_classified(sessions, github, fields, reason):
    classifier = FakeClassifier(CLASSIFIER.rules)
    assert reason in label(sessions, github, 1, classifier=classifier, config='skip_authors: ["dependabot[bot]"]',
                           **fields)
    assert classifier.seen == [] and github.writes() == []


def test_dry_run_classifies_and_stores_but_calls_nothing(sessions, github):
    assert label(sessions, github, 1, dry_run=True)[:2] == ("dry_run", "bug")
    assert github.calls == []


def test_a_target_precision_uses_the_models_per_label_thresholds(sessions, github):
    strict = FakeClassifier(CLASSIFIER.rules, thresholds={"bug": 0.95})
    assert label(sessions, github, 1, classifier=strict, config="target_precision: 0.9")[0] == "abstained"
    assert label(sessions, github, 2, classifier=strict, config="target_precision: 0.9")[0] == "applied"


# ---- feedback -------------------------------------------------------------------------------------

def event(action: str, number: int, *, labels=(), label=None, sender="maintainer", is_bot=False,
          delivery: str | None = None) -> dict:
    state = "closed" if action == "closed" else "open"
    return IssueEvent(delivery_id=delivery or f"{action}-{number}-{label}", action=action, installation_id=1,
                      repo=REPO, number=number, sender_login=sender, sender_is_bot=is_bot,
                      snapshot=snapshot(number, state=state, labels=tuple(labels)), label=label).job_kwargs()


def record(sessions, data: dict) -> str:
    with session_scope(sessions) as session:
        return feedback.record_issue_event(session, data, bot_login="issue-sorter[bot]", app_id=1)


def issue_row(sessions, number: int) -> tuple:
    with session_scope(sessions) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()
        prediction = store.latest_prediction(session, issue)
        return issue.confirmed_label, prediction.decision if prediction else None, issue.title


@pytest.fixture
def labelled(sessions, github):
    """Issue 1 labelled `bug` by the bot; no model is registered, so labels are known by their kind."""
    label(sessions, github, 1)
    return sessions


def test_closing_with_the_bots_label_on_accepts_it_and_confirms_training_data(labelled):
    assert record(labelled, event("closed", 1, labels=["bug"])).startswith("accepted")
    assert issue_row(labelled, 1)[:2] == ("bug", "accepted")


def test_a_human_removing_the_bots_label_rejects_it(labelled):
    assert record(labelled, event("unlabeled", 1, label="bug")).startswith("rejected")
    assert issue_row(labelled, 1)[:2] == (None, "rejected")


def test_a_human_replacing_the_bots_label_corrects_it(labelled):
    record(labelled, event("unlabeled", 1, label="bug"))
    assert record(labelled, event("labeled", 1, labels=["question"], label="question")).startswith("corrected")
    assert issue_row(labelled, 1)[:2] == ("question", "corrected")


def test_the_bots_own_label_events_decide_nothing(labelled):
    outcome = record(labelled, event("unlabeled", 1, label="bug", sender="issue-sorter[bot]", is_bot=True))
    assert outcome == "bot event: recorded, not a decision" and issue_row(labelled, 1)[:2] == (None, None)


def test_a_human_label_where_the_bot_abstained_is_new_training_data(sessions, github):
    label(sessions, github, 3)
    assert record(sessions, event("labeled", 3, labels=["question"], label="question")).startswith("new training")
    assert issue_row(sessions, 3)[0] == "question"


def test_deleting_an_issue_erases_its_text_and_training_label(labelled):
    record(labelled, event("closed", 1, labels=["bug"]))
    record(labelled, event("deleted", 1, labels=["bug"]))
    assert issue_row(labelled, 1) == (None, "accepted", "")


def test_the_same_delivery_is_recorded_once(labelled):
    once = event("unlabeled", 1, label="bug", delivery="d-twice")
    record(labelled, once)
    assert record(labelled, once) == "skipped: event already recorded"
    with session_scope(labelled) as session:
        assert len(session.scalars(select(LabelEvent)).all()) == 1


class Crash(Exception):
    """The worker dying (SIGKILL, the database going away) at one moment of the job."""


class CrashingGitHub(FakeGitHub):
    """Dies in add_labels, after GitHub took the label (`after_write`) or before."""

    def __init__(self, *, after_write: bool, **kwargs):
        super().__init__(**kwargs)
        self.after_write, self.crashes = after_write, 1

    def add_labels(self, repo, number, labels):
        if self.crashes and not self.after_write:
            self.crashes -= 1
            raise Crash
        super().add_labels(repo, number, labels)
        if self.crashes:
            self.crashes -= 1
            raise Crash


def label_as_a_job(sessions, github, number: int):
    """What bot.jobs does: one session, the checkpoint committing the decision before GitHub is written."""
    result = run_job(sessions, github, number, labels=tuple(github.issue_labels.get((REPO, number), ())),
                     checkpoint=True)
    return result if isinstance(result, str) else (result.outcome, result.label)


@pytest.mark.parametrize("after_write", [True, False], ids=["after-github-took-it", "before-github-heard"])
def test_a_job_that_dies_around_the_label_write_is_finished_once_with_its_prediction(sessions, after_write):
    github = CrashingGitHub(after_write=after_write, labels={REPO: list(LABELS)})
    with pytest.raises(Crash):
        label_as_a_job(sessions, github, 1)
    with session_scope(sessions) as session:  # the decision survived the crash, marked unfinished
        assert [p.outcome for p in session.scalars(select(Prediction))] == [labeling.PENDING]

    assert label_as_a_job(sessions, github, 1) == ("applied", "bug")  # RQ's retry of the same job
    assert github.issue_labels[(REPO, 1)] == ["bug"]
    # one write reached GitHub: the retry saw the label (after) or wrote it itself (before)
    assert [c for c in github.writes() if c[0] == "add_labels"] == [("add_labels", REPO, 1, ("bug",))]
    with session_scope(sessions) as session:
        assert [(p.outcome, p.applied) for p in session.scalars(select(Prediction))] == [("applied", True)]
    assert label_as_a_job(sessions, github, 1) == "it already carries 'bug'"  # and nothing more after
