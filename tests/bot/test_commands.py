"""`/issue-sorter retrain` in an issue comment: signed delivery → Redis → RQ worker → the permission asked of the
fake GitHub → a job on the training queue (never run here) and an answer in the issue."""

import pytest
from rq import Queue

from core.queues import FEEDBACK_QUEUE, TRAINING_QUEUE
from tests.bot.conftest import REPO, deliver, run_worker

pytestmark = pytest.mark.redis
ACKNOWLEDGED = "Retraining started."


def comment(client, payload, body: str, login: str, *, user_type: str = "User", delivery: str = "d-comment"):
    """A real `issue_comment.created` example on issue 1 of our repository, by `login`."""
    data = payload("issue_comment/created.with-installation")
    data["comment"].update(body=body)
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
    training = Queue(TRAINING_QUEUE, connection=redis)
    (job,) = training.jobs
    assert job.func_name == "trainer.jobs.retrain"
    assert job.kwargs["scope"] == REPO and job.kwargs["trigger"] == "comment"
    assert job.kwargs["reply_to"] == {"installation_id": 1, "repo": REPO, "number": issue}
    (answer,) = fake_github.comments(REPO, issue)
    assert answer.startswith(ACKNOWLEDGED)


@pytest.mark.parametrize("login", ["helper", "reader", "passer-by"])  # triage, read, not a collaborator
def test_retrain_from_anyone_else_is_refused_briefly_and_queues_nothing(bare_context, fake_github, client, payload,
                                                                        redis, issue, login):
    comment(client, payload, "/issue-sorter retrain", login)
    run_feedback_jobs(redis)
    assert permission_asked(fake_github, login)
    assert Queue(TRAINING_QUEUE, connection=redis).count == 0
    (answer,) = fake_github.comments(REPO, issue)
    assert answer.startswith(f"@{login} only maintainers and admins") and len(answer) < 200


@pytest.mark.parametrize("body,login,user_type", [
    ("Thanks, retraining sounds like a good idea.", "boss", "User"),  # no command
    ("", "boss", "User"),
    ("/issue-sorter retrain", "issue-sorter[bot]", "Bot"),  # our own comment quoting the command
    ("/issue-sorter retrain", "dependabot[bot]", "Bot"),  # any other bot
])
def test_comments_without_the_command_or_from_bots_do_nothing(bare_context, fake_github, client, payload, redis,
                                                              issue, body, login, user_type):
    comment(client, payload, body, login, user_type=user_type)
    run_feedback_jobs(redis)
    assert fake_github.calls("GET", r".*/permission") == []
    assert fake_github.comments(REPO, issue) == []
    assert Queue(TRAINING_QUEUE, connection=redis).count == 0


def test_a_longer_word_that_starts_like_the_command_is_not_the_command():
    from bot.commands import RETRAIN_COMMAND

    assert RETRAIN_COMMAND.match("/issue-sorter retrain please")
    assert not RETRAIN_COMMAND.match("/issue-sorter retrainer")
    assert not RETRAIN_COMMAND.match("please /issue-sorter retrain")
