"""`/issue-sorter retrain`, the rest of the story: the training job runs on a worker and answers with
both scores and the decision."""

import dataclasses
import datetime as dt

import pytest
from rq import Queue, SimpleWorker

from core import store
from core.db import session_scope
from core.queues import SERIALIZER, TRAINING_QUEUE
from core.tables import TrainingRun
from tests.bot.conftest import REPO, deliver, run_worker
from tests.paths import NLBSE
from trainer.dataset import load_file

pytestmark = [pytest.mark.redis, pytest.mark.slow]
KIND_LABELS = {"bug": "bug", "feature": "enhancement", "question": "question"}


def confirmed_issues(ctx, count: int) -> None:
    """Issues of REPO whose labels maintainers confirmed, oldest first (real NLBSE texts)."""
    opencv = [e for e in load_file(NLBSE / "issues_train.csv") if e.repo == "opencv/opencv"]
    by_kind = [[e for e in opencv if e.label == kind] for kind in KIND_LABELS]
    examples = [e for trio in zip(*by_kind) for e in trio][:count]  # bug, feature, question, bug, ...
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    with session_scope(ctx.sessionmaker) as session:
        repository = store.ensure_repository(session, REPO, 1)
        for number, example in enumerate(examples, 100):
            record, _ = store.upsert_issue(session, repository, number, title=example.title, body=example.body,
                                           author_login="someone", state="open",
                                           opened_at=start + dt.timedelta(days=number))
            record.confirmed_label, record.confirmed_by = KIND_LABELS[example.label], "maintainer"
            record.confirmed_at = start + dt.timedelta(days=number)


def test_a_maintainers_retrain_command_is_answered_with_old_and_new_scores(worker_context, fake_github, client,
                                                                          payload, redis, install_training_context):
    worker_context.settings = dataclasses.replace(worker_context.settings, retrain_epochs=1, retrain_max_length=32,
                                                  retrain_min_holdout=6)
    install_training_context()
    confirmed_issues(worker_context, 30)
    fake_github.add_issue(REPO, 1, "Retrain please", "")
    comment = payload("issue_comment/created.with-installation")
    comment["issue"]["number"] = 1
    comment["comment"]["body"] = "/issue-sorter retrain"
    comment["comment"]["user"].update(login="maintainer", type="User")
    deliver(client, "issue_comment", comment, "c-1")
    run_worker(redis, queues=("feedback",))  # permission asked, job queued, acknowledged
    assert Queue(TRAINING_QUEUE, connection=redis, serializer=SERIALIZER).count == 1
    SimpleWorker([TRAINING_QUEUE], connection=redis, serializer=SERIALIZER).work(burst=True)  # the training worker
    run_worker(redis, queues=("feedback",))  # the bot posts the answer the training job sent back
    acknowledgement, answer = fake_github.comments(REPO, 1)
    assert "Retraining started" in acknowledgement
    with session_scope(worker_context.sessionmaker) as session:
        (run,) = session.query(TrainingRun).all()
        assert run.trigger == "comment" and run.scope == REPO
        assert f"{run.champion_score:.3f}" in answer and f"{run.challenger_score:.3f}" in answer
        assert ("New model promoted" in answer) == run.promoted
