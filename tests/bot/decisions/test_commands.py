"""`/issue-sorter retrain` in an issue comment: signed delivery → Redis → RQ worker → the permission asked of the
fake GitHub → a job on the training queue (never run here) and an answer in the issue."""

import pytest
from rq import Queue

from core.queues import FEEDBACK_QUEUE, SERIALIZER, TRAINING_QUEUE
from tests.bot.conftest import REPO, deliver, run_worker

pytestmark = pytest.mark.redis
ACKNOWLEDGED = "Retraining started."
COMMENT_ID = 492700400


def comment(client, payload, body: str, login: str, *, user_type: str = "User", delivery: str = "d-comment",
            comment_id: int = COMMENT_ID):
    """A real `issue_comment.created` example on issue 1 of our repository, by `login`."""
    data = payload("issue_comment/created.with-installation")
    data["comment"].update(body=body, id=comment_id)
    data["comment"]["user"].update(login=login, type=user_type)
    data["sender"].update(login=login, type=user_type)
    data["issue"]["number"] = 1
    return deliver(client, "issue_comment", data, delivery)


@pytest.fixture
def issue(fake_github) -> int:
    fake_github.add_issue(REPO, 1, "Model keeps calling questions bugs", "")
    return 1


def permission_asked(fake_github, login: str) -> bool:
    return len(fake_github.calls("GET", rf"/repos/{REPO}/collaborators/{login}/permission")) == 1


def run_feedback_jobs(redis) -> None:
    run_worker(redis, queues=(FEEDBACK_QUEUE,))  # the training queue is left alone: retraining takes minutes


@pytest.mark.parametrize("login,role", [("boss", "admin"), ("maintainer", "maintain")])
def test_retrain_from_an_admin_or_maintainer_queues_one_training_job_and_says_so(
        bare_context, fake_github, client, payload, redis, issue, login, role):
    assert comment(client, payload, "/issue-sorter retrain", login).status_code == 202
    assert not comment(client, payload, "/issue-sorter retrain", login).json["queued"]  # GitHub redelivers
    run_feedback_jobs(redis)
    assert permission_asked(fake_github, login)
    training = Queue(TRAINING_QUEUE, connection=redis, serializer=SERIALIZER)
    (job,) = training.jobs
    assert job.func_name == "trainer.jobs.retrain"
    assert job.kwargs["scope"] == REPO and job.kwargs["trigger"] == "comment"
    assert job.kwargs["reply_to"] == {"installation_id": 1, "repo": REPO, "number": issue}
    (answer,) = fake_github.comments(REPO, issue)
    assert answer.startswith(ACKNOWLEDGED)


@pytest.mark.parametrize("login", ["helper", "reader", "passer-by"])  # triage, read, not a collaborator
def test_retrain_from_anyone_else_is_refused_with_a_reaction_that_pings_nobody(bare_context, fake_github, client,
                                                                               payload, redis, issue, login):
    for n in range(3):  # however often they ask, the issue gets no comment, so nobody is notified
        comment(client, payload, "/issue-sorter retrain", login, delivery=f"d-{n}", comment_id=COMMENT_ID + n)
    run_feedback_jobs(redis)
    assert permission_asked_times(fake_github, login) == 3
    assert Queue(TRAINING_QUEUE, connection=redis, serializer=SERIALIZER).count == 0
    assert fake_github.comments(REPO, issue) == []
    assert [fake_github.reactions(REPO, COMMENT_ID + n) for n in range(3)] == [["-1"]] * 3


def permission_asked_times(fake_github, login: str) -> int:
    return len(fake_github.calls("GET", rf"/repos/{REPO}/collaborators/{login}/permission"))


def test_one_retraining_per_repository_at_a_time_then_an_hours_cooldown(bare_context, fake_github, client,
                                                                        payload, redis, issue):
    from bot.decisions.commands import COOLDOWN_KEY, RETRAIN_COOLDOWN_SECONDS

    comment(client, payload, "/issue-sorter retrain", "boss", delivery="d-1", comment_id=1)
    comment(client, payload, "/issue-sorter retrain", "maintainer", delivery="d-2", comment_id=2)
    run_feedback_jobs(redis)
    training = Queue(TRAINING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert training.count == 1  # the second asked while the first was queued
    assert fake_github.reactions(REPO, 2) == ["confused"] and fake_github.reactions(REPO, 1) == []
    (cooldown,) = redis.keys(COOLDOWN_KEY.format("*"))
    assert 0 < redis.ttl(cooldown) <= RETRAIN_COOLDOWN_SECONDS
    training.empty()  # the retraining ran; the cooldown still holds
    comment(client, payload, "/issue-sorter retrain", "boss", delivery="d-3", comment_id=3)
    run_feedback_jobs(redis)
    assert training.count == 0 and fake_github.reactions(REPO, 3) == ["confused"]
    redis.delete(cooldown)  # an hour later
    comment(client, payload, "/issue-sorter retrain", "boss", delivery="d-4", comment_id=4)
    run_feedback_jobs(redis)
    assert training.count == 1 and fake_github.reactions(REPO, 4) == []
    assert [c for c in fake_github.comments(REPO, issue) if c.startswith(ACKNOWLEDGED)] == [
        fake_github.comments(REPO, issue)[0]] * 2  # one acknowledgement per queued retraining


def test_a_longer_word_that_starts_like_the_command_is_not_the_command():
    from bot.decisions.commands import RETRAIN_COMMAND

    assert RETRAIN_COMMAND.match("/issue-sorter retrain please")
    assert not RETRAIN_COMMAND.match("/issue-sorter retrainer")
    assert not RETRAIN_COMMAND.match("please /issue-sorter retrain")
