"""GitHub issue types: `apply: type | both` sets the organisation's type for the predicted kind, and a
maintainer changing the type is a decision like a label change. Through the real pipeline: signed
delivery → Redis → RQ worker with the real model → the fake GitHub, which serves the types API."""

import pytest
from sqlalchemy import select

from bot.repo_config import CONFIG_PATH
from core.db import session_scope
from core.tables import IssueRecord, Prediction
from tests.bot.conftest import INSTALLATION, deliver, issue_payload, run_worker
from tests.bot.test_rules import label, snapshot
from tests.fakes import FakeGitHub

pytestmark = [pytest.mark.redis, pytest.mark.slow]
TYPED = "octo/typed"
TYPES = ["Task", "Bug", "Feature", "Question"]


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


def type_event(payload, action: str, number: int, type_name: str, delivery: str) -> dict:
    data = issue_payload(payload, "labeled", number, sender="maintainer")
    data.pop("label", None)
    data["action"] = action
    data["repository"].update(full_name=TYPED, name="typed")
    data["type"] = {"id": 7, "node_id": "IT_7", "name": type_name, "description": None, "color": "gray",
                    "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z", "is_enabled": True}
    data["issue"]["type"] = data["type"] if action == "typed" else None
    return data


def predictions(ctx):
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(Prediction).order_by(Prediction.id)).all()


def test_apply_type_sets_the_issue_type_of_the_predicted_kind_and_no_label(worker_context, fake_github, client,
                                                                          payload, redis, typed_repo):
    typed_repo("type")
    open_issue(fake_github, client, payload, 1, "App crashes with TypeError when saving", "Traceback ...", "t-1")
    run_worker(redis)
    (row,) = predictions(worker_context)
    assert row.outcome == "applied" and row.label in ("Bug", "Feature", "Question")
    assert fake_github.issue_type(TYPED, 1) == row.label and fake_github.issue_labels(TYPED, 1) == []
    assert fake_github.calls("PATCH", rf"/repos/{TYPED}/issues/1")[0].json == {"type": row.label}


def test_apply_both_sets_the_label_and_the_matching_type(worker_context, fake_github, client, payload, redis,
                                                        typed_repo):
    typed_repo("both")
    open_issue(fake_github, client, payload, 2, "Add dark mode to the settings page", "A dark theme, please.", "t-2")
    run_worker(redis)
    (row,) = predictions(worker_context)
    (label,) = fake_github.issue_labels(TYPED, 2)
    kind_type = {"bug": "Bug", "enhancement": "Feature", "question": "Question"}[label]
    assert row.label == label and fake_github.issue_type(TYPED, 2) == kind_type and "issue type" in row.reason


def test_a_maintainer_changing_the_type_corrects_the_prediction(worker_context, fake_github, client, payload,
                                                               redis, typed_repo):
    typed_repo("type")
    open_issue(fake_github, client, payload, 3, "App crashes with TypeError when saving", "Traceback ...", "t-3")
    run_worker(redis)
    (row,) = predictions(worker_context)
    other = next(name for name in ("Bug", "Feature", "Question") if name != row.label)
    deliver(client, "issues", type_event(payload, "untyped", 3, row.label, "t-3-untyped"), "t-3-untyped")
    deliver(client, "issues", type_event(payload, "typed", 3, other, "t-3-typed"), "t-3-typed")
    run_worker(redis)
    (row,) = predictions(worker_context)
    with session_scope(worker_context.sessionmaker) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == 3)).one()
        assert (row.decision, issue.confirmed_label, issue.confirmed_by) == ("corrected", other, "maintainer")


def test_an_issue_that_already_has_a_type_of_a_kind_is_left_alone():
    from bot import labeling

    policy = labeling.LabelingPolicy(apply="type")
    assert "already has the type" in labeling.skip_reason(snapshot(1, issue_type="Bug"), ["bug", "feature"], policy)
    assert labeling.skip_reason(snapshot(1, issue_type="Task"), ["bug", "feature"], policy) is None
    assert labeling.skip_reason(snapshot(1, issue_type="Bug"), ["bug"], labeling.LabelingPolicy()) is None


def test_apply_type_in_the_fast_rules_writes_the_type_once(sessions):
    github = FakeGitHub(labels={"octo/widgets": ["bug"]}, issue_types={"octo/widgets": TYPES})
    outcome, chosen, _ = label(sessions, github, 1, config="apply: type")
    assert (outcome, chosen) == ("applied", "Bug")
    assert github.writes() == [("set_issue_type", "octo/widgets", 1, "Bug")]
