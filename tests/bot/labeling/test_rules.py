"""The labelling rules on SQLite, with a FakeClassifier and an in-memory GitHub (tests/bot/rules.py): no
Redis, no torch, no HTTP. The repository config's rules are in test_repo_config.py, the feedback rules in
test_feedback.py; the pipeline end to end in test_jobs.py."""

import dataclasses
import datetime as dt

import pytest
from sqlalchemy import select

from bot.labeling import decide as labeling
from core.db import session_scope
from core.tables import Prediction
from tests.bot.rules import (
    CLASSIFIER,
    LABELS,
    REPO,
    SETTINGS,
    label,
    predictions,
    run_job,
    snapshot,
)
from tests.fakes import FakeClassifier, FakeGitHub


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


def test_a_missing_kind_label_is_created_only_when_allowed(sessions, github):
    github.labels[REPO] = ["question"]
    assert label(sessions, github, 1)[0] == "abstained"
    creating = dataclasses.replace(SETTINGS, create_labels=True)
    label(sessions, github, 2, settings=creating)
    assert ("create_label", REPO, "feature") in github.calls and github.issue_labels[(REPO, 2)] == ["feature"]


def test_an_issue_already_handled_is_not_labelled_twice(sessions, github):
    label(sessions, github, 1)
    github.issue_labels[(REPO, 1)] = []  # the label was removed on GitHub; a new delivery arrives
    assert label(sessions, github, 1) == "it was already handled"
    assert len(github.writes()) == 1 and len(predictions(sessions)) == 1


LEAVE_ALONE = [({"state": "closed"}, "closed"), ({"is_pull_request": True}, "pull request"),
               ({"labels": ("enhancement",)}, "already carries")]


@pytest.mark.parametrize("fields,reason", [*LEAVE_ALONE, ({"author_login": "dependabot[bot]"}, "skip_authors")])
def test_issues_to_leave_alone_are_not_classified(sessions, github, fields, reason):
    classifier = FakeClassifier(CLASSIFIER.rules)
    assert reason in label(sessions, github, 1, classifier=classifier, config='skip_authors: ["dependabot[bot]"]',
                           **fields)
    assert classifier.seen == [] and github.writes() == [] and predictions(sessions) == []


@pytest.mark.parametrize("fields,reason", LEAVE_ALONE)
def test_issues_that_must_be_left_alone_get_no_label_as_github_has_them_now(sessions, github, fields, reason):
    """A redelivery or a long queue: the delivery's copy is old and says open; GitHub's says otherwise."""
    github.issues[(REPO, 1)] = snapshot(1, **fields)
    old = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=SETTINGS.fresh_delivery_seconds + 60)
    assert reason in label(sessions, github, 1, updated_at=old)
    assert ("get_issue", REPO, 1) in github.calls and github.writes() == [] and predictions(sessions) == []


def test_dry_run_classifies_and_stores_but_calls_nothing(sessions, github):
    assert label(sessions, github, 1, dry_run=True)[:2] == ("dry_run", "bug")
    assert github.calls == []


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
