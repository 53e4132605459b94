"""GitHub issue types: `apply: type | both` sets the organisation's type for the predicted kind, and a
maintainer changing the type is a decision like a label change. The rules on the fakes (tests/bot/rules.py);
one test through the real pipeline: signed delivery → Redis → RQ worker with the real model → the fake
GitHub over HTTP, which serves the types API."""

import pytest
from sqlalchemy import select

from bot.labeling import decide as labeling
from bot.labeling.config import CONFIG_PATH
from core.db import session_scope
from core.tables import Prediction
from tests.bot.conftest import INSTALLATION, deliver, issue_payload, run_worker
from tests.bot.rules import REPO, event, issue_row, label, record, snapshot, stored_issue

TYPED = "octo/typed"
TYPES = ["Task", "Bug", "Feature", "Question"]
pytestmark = pytest.mark.github(issue_types={REPO: TYPES})  # the organisation's issue types


@pytest.fixture
def typed_repo(fake_github):
    def configure(apply: str):
        fake_github.add_repo(TYPED, labels=["bug", "enhancement", "question"], installation_id=INSTALLATION,
                             issue_types=TYPES, files={CONFIG_PATH: f"apply: {apply}\n"},
                             collaborators={"maintainer": "maintain"})
    return configure


def open_issue(fake_github, client, payload, number: int, title: str, body: str, delivery: str):
    fake_github.add_issue(TYPED, number, title, body)
    data = issue_payload(payload, "opened", number, title=title, body=body)
    data["repository"].update(full_name=TYPED, name="typed")
    return deliver(client, "issues", data, delivery)


def predictions(ctx):
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(Prediction).order_by(Prediction.id)).all()


@pytest.mark.redis
@pytest.mark.slow
def test_apply_type_sets_the_issue_type_of_the_predicted_kind_and_no_label(worker_context, fake_github, client,
                                                                          payload, redis, typed_repo):
    typed_repo("type")
    open_issue(fake_github, client, payload, 1, "App crashes with TypeError when saving", "Traceback ...", "t-1")
    run_worker(redis)
    (row,) = predictions(worker_context)
    assert row.outcome == "applied" and row.label in ("Bug", "Feature", "Question")
    assert fake_github.issue_type(TYPED, 1) == row.label and fake_github.issue_labels(TYPED, 1) == []
    assert fake_github.calls("PATCH", rf"/repos/{TYPED}/issues/1")[0].json == {"type": row.label}


def test_an_issue_that_already_has_a_type_of_a_kind_is_left_alone():
    policy = labeling.LabelingPolicy(apply="type")
    assert "already has the type" in labeling.skip_reason(snapshot(1, issue_type="Bug"), ["bug", "feature"], policy)
    assert labeling.skip_reason(snapshot(1, issue_type="Task"), ["bug", "feature"], policy) is None
    assert labeling.skip_reason(snapshot(1, issue_type="Bug"), ["bug"], labeling.LabelingPolicy()) is None


def test_apply_type_writes_the_predicted_kinds_type_once_and_no_label(sessions, github):
    outcome, chosen, _ = label(sessions, github, 1, config="apply: type")
    assert (outcome, chosen) == ("applied", "Bug")
    assert github.writes() == [("set_issue_type", REPO, 1, "Bug")] and github.issue_labels == {}


def test_apply_both_sets_the_label_and_the_matching_type(sessions, github):
    outcome, chosen, reason = label(sessions, github, 2, config="apply: both")
    assert (outcome, chosen) == ("applied", "enhancement") and "issue type" in reason
    assert github.issue_labels == {(REPO, 2): ["enhancement"]} and github.issue_type(REPO, 2) == "Feature"


def test_a_maintainer_changing_the_type_corrects_the_prediction(sessions, github):
    assert label(sessions, github, 1, config="apply: type")[:2] == ("applied", "Bug")
    record(sessions, event("untyped", 1, label="Bug"))
    assert record(sessions, event("typed", 1, label="Feature", issue_type="Feature")).startswith("corrected")
    confirmed, decision, _ = issue_row(sessions, 1)
    assert (decision, confirmed) == ("corrected", "Feature")
    assert stored_issue(sessions, 1).confirmed_by == "maintainer"
