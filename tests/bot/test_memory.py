"""The memory through the real worker: maintainers' decisions move the next prediction of a similar issue in
that repository, and only there (webhook test client, Redis, SimpleWorker, fake GitHub, real model). The vote
weighs once the memory predicts its own latest issues better than the model did (core.memory's self-check):
two corrections of the same kind on issues alike, where the model said otherwise."""

import dataclasses

import numpy as np
import pytest
from sqlalchemy import select

from bot import context
from bot.labeling.config import CONFIG_PATH
from bot.worker import build_context
from core.db import session_scope
from core.tables import IssueRecord, MemoryEntry, ModelVersion, Prediction, Repository
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker
from tests.tiny_model import promote_model

pytestmark = [pytest.mark.redis, pytest.mark.slow]
OTHER = "Codertocat/Other-Repo"
TITLE, BODY = "Crash when saving a file", "Saving a large file fails with an error. What should I do?"
REPO_LABEL = {"bug": "bug", "feature": "enhancement", "question": "question"}


def send(client, payload, action: str, number: int, delivery: str, *, repo: str = REPO, labels=(), label=None,
         sender: str = "maintainer"):
    data = issue_payload(payload, action, number, title=TITLE, body=BODY, labels=labels, label=label,
                         sender=sender)
    data["repository"].update(full_name=repo, name=repo.split("/")[1])
    if repo != REPO:  # another repository has another GitHub id: repositories are known by it, not by name
        data["repository"]["id"] = data["repository"]["id"] + 1
    return deliver(client, "issues", data, delivery)


def open_issue(fake_github, client, payload, redis, number: int, *, repo: str = REPO) -> Prediction:
    fake_github.add_issue(repo, number, TITLE, BODY)
    assert send(client, payload, "opened", number, f"open-{repo}-{number}", repo=repo).status_code == 202
    run_worker(redis)
    with session_scope(context.current().sessionmaker) as session:
        return session.scalars(select(Prediction).join(IssueRecord).join(Repository).where(
            Repository.full_name == repo, IssueRecord.number == number)).one()


def correct(fake_github, client, payload, redis, number: int, wrong: str, right: str) -> None:
    """The maintainer replaces the bot's label with the right one, as GitHub delivers it."""
    send(client, payload, "unlabeled", number, f"un-{number}", labels=[], label=wrong)
    fake_github.add_issue(REPO, number, TITLE, BODY, labels=[right])
    send(client, payload, "labeled", number, f"la-{number}", labels=[right], label=right)
    run_worker(redis)


def teach(fake_github, client, payload, redis, numbers) -> tuple[Prediction, str]:
    """Open issues `numbers` (alike) and correct each to the kind the model put second for the first: the
    first one's prediction and that kind."""
    first = open_issue(fake_github, client, payload, redis, numbers[0])
    kind = runner_up(first.scores)
    for number in numbers:
        prediction = first if number == numbers[0] else open_issue(fake_github, client, payload, redis, number)
        correct(fake_github, client, payload, redis, number, prediction.label, REPO_LABEL[kind])
    return first, kind


def runner_up(scores: dict[str, float]) -> str:
    return sorted(scores, key=scores.get)[-2]


def restart(settings) -> None:
    """A new worker process: nothing in memory but what the database holds."""
    ctx = build_context(settings, redis=context.current().redis)
    context.configure(ctx)


def test_a_confirmed_issue_changes_the_next_prediction_of_a_similar_issue_and_survives_a_restart(
        worker_context, fake_github, client, payload, redis):
    # the maintainer says twice: not what the model thought most likely
    first, kind = teach(fake_github, client, payload, redis, (1, 2))
    with session_scope(worker_context.sessionmaker) as session:
        entries = session.scalars(select(MemoryEntry)).all()
        serving = session.get(ModelVersion, first.model_version_id).version
        assert {(e.label, e.model_version) for e in entries} == {(REPO_LABEL[kind], serving)}  # as decided
        vector = np.frombuffer(entries[0].embedding, dtype="<f4")
        assert vector.shape == (384,) and np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
        assert set(entries[0].scores) == set(first.scores)  # the model's own answer, for the self-check
    restart(worker_context.settings)
    third = open_issue(fake_github, client, payload, redis, 3)
    assert third.scores[kind] > first.scores[kind]
    assert (first.predicted, third.predicted) == (max(first.scores, key=first.scores.get), kind)
    assert fake_github.issue_labels(REPO, 3) == [REPO_LABEL[kind]]


def test_the_memory_is_per_repository(worker_context, fake_github, client, payload, redis):
    fake_github.add_repo(OTHER, labels=list(REPO_LABEL.values()), installation_id=INSTALLATION)
    before = open_issue(fake_github, client, payload, redis, 1, repo=OTHER)
    first, kind = teach(fake_github, client, payload, redis, (1, 2))
    assert first.scores == pytest.approx(before.scores)  # same model, same text, empty memories
    after = open_issue(fake_github, client, payload, redis, 2, repo=OTHER)
    assert after.scores == pytest.approx(before.scores)  # REPO's decisions did not move OTHER's predictions
    assert open_issue(fake_github, client, payload, redis, 3).predicted == kind


def test_with_the_memory_off_a_decision_does_not_move_the_next_prediction(worker_context, fake_github, client,
                                                                           payload, redis):
    restart(dataclasses.replace(worker_context.settings, memory=False))
    first = open_issue(fake_github, client, payload, redis, 1)
    correct(fake_github, client, payload, redis, 1, first.label, REPO_LABEL[runner_up(first.scores)])
    assert open_issue(fake_github, client, payload, redis, 2).scores == pytest.approx(first.scores)
    with session_scope(context.current().sessionmaker) as session:
        assert session.scalars(select(MemoryEntry)).all() == []


def test_a_label_taken_back_leaves_the_memory(worker_context, fake_github, client, payload, redis):
    first = open_issue(fake_github, client, payload, redis, 1)
    right = REPO_LABEL[runner_up(first.scores)]
    correct(fake_github, client, payload, redis, 1, first.label, right)
    send(client, payload, "unlabeled", 1, "un-again", labels=[], label=right)
    run_worker(redis)
    with session_scope(worker_context.sessionmaker) as session:
        assert session.scalars(select(MemoryEntry)).all() == []
    assert open_issue(fake_github, client, payload, redis, 2).scores == pytest.approx(first.scores)


def test_an_issue_the_bot_abstains_on_gets_the_configured_label(worker_context, fake_github, client, payload,
                                                               redis):
    fake_github.add_repo(REPO, labels=fake_github.repo_labels(REPO),
                         files={CONFIG_PATH: "threshold: 1.0\nabstain_label: needs-triage\n"})
    prediction = open_issue(fake_github, client, payload, redis, 1)
    assert fake_github.issue_labels(REPO, 1) == ["needs-triage"]
    assert "needs-triage" in fake_github.repo_labels(REPO)  # created, as the repository had none
    assert (prediction.outcome, prediction.label, prediction.applied) == ("abstained", None, False)
    assert "marked 'needs-triage'" in prediction.reason


def test_by_default_an_abstention_puts_no_label_on(worker_context, fake_github, client, payload, redis):
    fake_github.add_repo(REPO, labels=fake_github.repo_labels(REPO), files={CONFIG_PATH: "threshold: 1.0\n"})
    assert open_issue(fake_github, client, payload, redis, 1).outcome == "abstained"
    assert fake_github.issue_labels(REPO, 1) == []


def test_when_another_model_serves_the_memory_is_re_embedded_from_the_stored_text(
        worker_context, fake_github, client, payload, redis, tiny_model_dir):
    """The first job that sees the new version queues the fill on the feedback queue (bot.decisions.memory_fill); the
    labelling job itself embeds nothing but its issue, so the issue after it is the first to gain."""
    _, kind = teach(fake_github, client, payload, redis, (1, 2))
    settings = worker_context.settings
    version = promote_model(settings.database_url, settings.model_dir, tiny_model_dir)  # a new version
    third = open_issue(fake_github, client, payload, redis, 3)  # its job queued the fill; the worker ran it
    with session_scope(worker_context.sessionmaker) as session:  # the memory has caught up: old rows go
        assert session.execute(select(MemoryEntry.model_version, MemoryEntry.label)).all() == [
            (version, REPO_LABEL[kind])] * 2
        assert session.get(ModelVersion, third.model_version_id).version == version
    assert open_issue(fake_github, client, payload, redis, 4).predicted == kind
