"""GitHub's write spacing holds per installation across every worker process.

It was PyGithub's throttle: per client, so per worker process, and by sleeping in the worker's thread.
Three labelling workers on one installation wrote up to three times a second. Now a write claims the
installation's slot in Redis; one that must wait is rescheduled and the worker moves on.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from redis import Redis
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from bot import context
from bot.decisions.commands import cooldown_key
from bot.github_api.write_spacing import SLOT_KEY, SpacedGitHub, WriteDeferred, WriteSpacing
from bot.github_api.write_turns import TURN_KEY, TURN_META
from bot.labeling import decide as labeling
from bot.worker import build_context
from core import metrics
from core.db import session_scope
from core.queues import FEEDBACK_QUEUE, LABELING_QUEUE, REPLY_TO_RETRAIN, SERIALIZER, enqueue, make_queue
from core.tables import WebhookDelivery
from tests.bot import rules
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker
from tests.bot.decisions.test_commands import COMMENT_ID, comment
from tests.fakes import FakeClassifier, FakeGitHub

pytestmark = pytest.mark.redis


def worker(settings, redis_url: str, github: FakeGitHub):
    """One worker process's context: its own Redis connection, the same Redis."""
    return build_context(settings, redis=Redis.from_url(redis_url), github_for=lambda installation: github)


def test_two_workers_on_one_installation_write_an_interval_apart(settings, redis, redis_url):
    spaced = dataclasses.replace(settings, github_write_interval=5.0)
    github = FakeGitHub()
    first, second = worker(spaced, redis_url, github), worker(spaced, redis_url, github)
    first.github(1).add_labels(REPO, 1, ["bug"])
    with pytest.raises(WriteDeferred) as deferred:
        second.github(1).create_comment(REPO, 2, "hello")
    assert 4 < deferred.value.retry_after <= 5 and deferred.value.turn_held  # the next turn, booked for it
    second.github(2).add_labels(REPO, 3, ["bug"])  # another installation has its own turns
    second.github(1).list_labels(REPO)  # reads are not spaced
    assert [call[0] for call in github.writes()] == ["add_labels", "add_labels"]
    redis.delete(SLOT_KEY.format(1))  # the interval has passed
    rerun = SpacedGitHub(github, WriteSpacing(Redis.from_url(redis_url), 5.0), 1, turn=lambda: True)
    rerun.create_comment(REPO, 2, "hello")  # its rescheduled run, at its turn: written without booking again
    assert [call[0] for call in github.writes()] == ["add_labels", "add_labels", "create_comment"]
    assert 9 < WriteSpacing(redis, 5.0).reserve(1) <= 10  # the turn after the comment's, not after two


def test_a_turn_less_than_a_second_away_is_waited_for_in_the_worker(redis, redis_url):
    """RQ's scheduler releases a job on a whole second: a write whose turn is nearer waits in the worker,
    an interval after the write before, instead of up to a second more in the scheduled registry."""
    github = FakeGitHub()
    SpacedGitHub(github, WriteSpacing(Redis.from_url(redis_url), 0.5), 1).add_labels(REPO, 1, ["bug"])
    written = time.monotonic()
    SpacedGitHub(github, WriteSpacing(Redis.from_url(redis_url), 0.5), 1).create_comment(REPO, 2, "hello")
    assert 0.45 <= time.monotonic() - written  # no WriteDeferred: slept until its turn, then wrote
    assert [call[0] for call in github.writes()] == ["add_labels", "create_comment"]


def test_turns_are_booked_once_each_in_order_per_installation_and_apart_across_installations(redis, redis_url):
    """Twenty writes from four processes at once: twenty turns an interval apart, none shared; another
    installation's first write is free at once."""
    spacings = [WriteSpacing(Redis.from_url(redis_url), 10.0) for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        waits = list(pool.map(lambda i: spacings[i % 4].reserve(7), range(20)))
    assert sorted(round(wait / 10) for wait in waits) == list(range(20))
    assert spacings[0].reserve(8) == 0.0
    assert 180_000 < redis.pttl(TURN_KEY.format(7)) <= 200_000  # the key lives until the installation is idle


def test_the_slot_is_one_clock_for_every_process(redis, redis_url):
    """Redis's clock decides: two clients (two processes) in one burst get one write between them."""
    spacings = [WriteSpacing(Redis.from_url(redis_url), 1.0) for _ in range(4)]
    granted = [spacing.claim(7) == 0 for spacing in spacings for _ in range(5)]
    assert granted.count(True) == 1
    assert 0 < redis.pttl(SLOT_KEY.format(7)) <= 1000  # the key lives only while it can refuse


class SlowWrites(FakeGitHub):
    """A GitHub whose writes take `seconds` to answer (a loaded machine, a slow network)."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def add_labels(self, *args, **kwargs):
        time.sleep(self.seconds)
        return super().add_labels(*args, **kwargs)


def test_the_interval_runs_from_the_write_s_answer_not_its_claim(redis, redis_url):
    """A write GitHub took 0.4 s to answer may have arrived at its end: the next write of the installation,
    from another process, waits a whole interval after the answer, not after the claim."""
    slow = SlowWrites(0.4)
    SpacedGitHub(slow, WriteSpacing(Redis.from_url(redis_url), 0.5), 1).add_labels(REPO, 1, ["bug"])
    other = WriteSpacing(Redis.from_url(redis_url), 0.5)
    assert 0.4 < other.claim(1) <= 0.5  # 0.4 s after the claim, but just after the answer
    assert 0 < redis.pttl(SLOT_KEY.format(1)) <= 500


def test_spacing_off_writes_straight_through(settings, redis, redis_url):
    github = FakeGitHub()
    ctx = worker(dataclasses.replace(settings, github_write_interval=0.0), redis_url, github)
    for number in range(3):
        ctx.github(1).add_labels(REPO, number, ["bug"])
    assert len(github.writes()) == 3 and not redis.keys(SLOT_KEY.format("*"))


@pytest.fixture
def spaced_context(app_settings, sessions, redis):
    """The bot's worker on the fake GitHub with writes spaced 30 s apart per installation."""
    ctx = build_context(dataclasses.replace(app_settings, github_write_interval=30.0), redis=redis)
    context.configure(ctx)
    yield ctx
    context.configure(None)


def test_a_job_whose_write_must_wait_is_rescheduled_not_slept(spaced_context, fake_github, client, payload,
                                                               redis):
    fake_github.add_issue(REPO, 1, "Model keeps calling questions bugs", "")
    WriteSpacing(redis, 30.0).reserve(1)  # another worker took installation 1's turn just now
    redis.set(cooldown_key("retrain", REPO), "boss", ex=3600)  # a retraining was queued a minute ago
    comment(client, payload, "/issue-sorter retrain", "maintainer", delivery="d-wait")  # refused: a reaction
    started = time.monotonic()
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert time.monotonic() - started < 10  # the worker moved on, instead of waiting half a minute
    assert fake_github.reactions(REPO, COMMENT_ID) == []
    scheduled = ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.get_job_ids() == ["handle_comment--d-wait--defer1"]
    when = scheduled.get_scheduled_time("handle_comment--d-wait--defer1").timestamp()
    assert time.time() + 25 < when <= time.time() + 31  # its turn, booked once, rounded up to its second
    job = Job.fetch("handle_comment--d-wait--defer1", connection=redis, serializer=SERIALIZER)
    assert job.meta == {"attempt": 1, "deferrals": 1, TURN_META: 1}  # no failed attempt; its turn is held
    assert not redis.hgetall(metrics.GITHUB_ERRORS_KEY)  # nor a GitHub error: GitHub was never asked
    with session_scope(spaced_context.sessionmaker) as session:
        assert session.get(WebhookDelivery, "d-wait") is None  # not done yet: it runs again

    redis.delete(SLOT_KEY.format(1))  # the interval has passed
    scheduled.remove(job)
    make_queue(redis, FEEDBACK_QUEUE).enqueue_job(job)  # what RQ's scheduler does at its time
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert fake_github.reactions(REPO, COMMENT_ID) == ["confused"]
    with session_scope(spaced_context.sessionmaker) as session:
        assert session.get(WebhookDelivery, "d-wait") is not None


def test_a_labelling_job_deferred_between_its_writes_finishes_its_decision_once(sessions, redis):
    """Comment mode writes the label, then the comment, an interval apart: the comment is deferred, the
    decision stays pending, and the rescheduled job posts the comment without asking the model again."""
    github = rules.repository()
    rules.use_config(github, "mode: comment\n")
    turns = iter([False, False, True])  # the first run books its turns; the rescheduled one holds the comment's
    spaced = SpacedGitHub(github, WriteSpacing(redis, 3.0), 1, turn=lambda: next(turns, False))
    classifier = FakeClassifier({"crash": "bug"})
    with pytest.raises(WriteDeferred):
        rules.run_job(sessions, spaced, 1, classifier=classifier, checkpoint=True)
    assert [call[0] for call in github.writes()] == ["add_labels"]
    assert [p.outcome for p in rules.predictions(sessions)] == [labeling.PENDING]
    asked = len(classifier.seen)
    redis.delete(SLOT_KEY.format(1))  # the interval has passed: its turn has come
    result = rules.run_job(sessions, spaced, 1, classifier=classifier, checkpoint=True, labels=("bug",))
    assert result.outcome == "applied" and len(classifier.seen) == asked
    assert [call[0] for call in github.writes()] == ["add_labels", "create_comment"]


def test_a_retraining_s_reply_that_must_wait_is_rescheduled_not_failed(spaced_context, fake_github, redis):
    """The trainer's answer under a `/issue-sorter retrain` comment is a write too: deferred, it comes later."""
    fake_github.add_issue(REPO, 1, "Model keeps calling questions bugs", "")
    WriteSpacing(redis, 30.0).reserve(1)  # another worker took installation 1's turn just now
    reply_to, result = {"installation_id": 1, "repo": REPO, "number": 1}, {"summary": "0.71 -> 0.74, promoted"}
    enqueue(redis, REPLY_TO_RETRAIN, {"reply_to": reply_to, "result": result}, job_id="reply_to_retrain--r1")
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert fake_github.comments(REPO, 1) == []
    assert not FailedJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids()
    scheduled = ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.get_job_ids() == ["reply_to_retrain--r1--defer1"]

    redis.delete(SLOT_KEY.format(1))  # the interval has passed
    job = Job.fetch("reply_to_retrain--r1--defer1", connection=redis, serializer=SERIALIZER)
    scheduled.remove(job)
    make_queue(redis, FEEDBACK_QUEUE).enqueue_job(job)  # what RQ's scheduler does at its time
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert len(fake_github.comments(REPO, 1)) == 1 and "0.71 -> 0.74" in fake_github.comments(REPO, 1)[0]


@pytest.mark.settings(github_write_interval=0.5)
def test_issues_whose_turns_are_less_than_a_second_away_are_queued_at_once_and_written_apart(
        worker_context, fake_github, client, payload, redis):
    """The receiver queues a job whose turn is nearer than RQ's scheduler's second; its write waits the rest
    of the interval in the worker. Each job runs once, and GitHub sees the labels an interval apart."""
    for number in (1, 2):
        fake_github.add_issue(REPO, number, "App crash on save", "Traceback ...")
        assert deliver(client, "issues", issue_payload(payload, "opened", number), f"near-{number}").status_code == 202
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--near-1", "label_issue--near-2"]
    assert not ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids()
    run_worker(redis, queues=(LABELING_QUEUE,))
    labelled = fake_github.calls("POST", rf"/repos/{REPO}/issues/\d+/labels")
    assert [call.path.split("/")[-2] for call in labelled] == ["1", "2"]
    assert labelled[1].received_at - labelled[0].received_at >= 0.45
    assert not ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids()


def _reads(fake) -> int:
    """The repository reads GitHub answered (labels, issues, the config file, permissions)."""
    return sum(1 for request in fake.requests if request.method == "GET" and request.path.startswith("/repos/"))


def _scheduled_to_queue(redis, job_id: str) -> None:
    """What RQ's scheduler does at the job's time."""
    job = Job.fetch(job_id, connection=redis, serializer=SERIALIZER)
    ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).remove(job)
    make_queue(redis, LABELING_QUEUE).enqueue_job(job)


@pytest.mark.settings(github_write_interval=30.0)
def test_a_flood_waits_for_its_turns_in_the_scheduled_registry_and_each_job_runs_once(
        worker_context, fake_github, client, payload, redis):
    """A labelling job whose write had to wait was rescheduled again and again, reading the issue
    and its labels on every run (100 writes on one installation: 2,061 job runs), in the queue before every
    other installation's jobs. Now the receiver books each job's turn: the first is queued, the others wait
    in RQ's scheduled registry at their turns, and each runs once, reading what an unhurried job reads."""
    for number in (1, 2, 3):
        fake_github.add_issue(REPO, number, "App crash on save", "Traceback ...")
        assert deliver(client, "issues", issue_payload(payload, "opened", number), f"flood-{number}").status_code == 202
    queue = make_queue(redis, LABELING_QUEUE)
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert queue.job_ids == ["label_issue--flood-1"]
    assert scheduled.get_job_ids() == ["label_issue--flood-2", "label_issue--flood-3"]
    turns = [scheduled.get_scheduled_time(f"label_issue--flood-{n}").timestamp() - time.time() for n in (2, 3)]
    assert 28 < turns[0] <= 31 and 58 < turns[1] <= 61  # an interval apart, rounded up to their seconds

    run_worker(redis, queues=(LABELING_QUEUE,))
    first_reads = _reads(fake_github)
    assert fake_github.issue_labels(REPO, 1)  # labelled
    redis.delete(SLOT_KEY.format(INSTALLATION))  # its turn has come: the interval has passed
    _scheduled_to_queue(redis, "label_issue--flood-2")
    run_worker(redis, queues=(LABELING_QUEUE,))
    assert fake_github.issue_labels(REPO, 2)
    assert scheduled.get_job_ids() == ["label_issue--flood-3"]  # written at its turn: no rerun scheduled
    assert _reads(fake_github) - first_reads <= first_reads  # no more reads than the first job's
    assert 85 < WriteSpacing(redis, 30.0).reserve(INSTALLATION) <= 90  # its turn was not booked twice


@pytest.mark.settings(github_write_interval=30.0)
def test_strangers_commands_write_nothing_and_take_no_write_turn(bare_context, fake_github, client, payload, redis):
    """A flood of `/issue-sorter retrain` from people without a role costs the installation no write, and
    no turn a labelling job would then wait behind."""
    for number in range(5):
        comment(client, payload, "/issue-sorter retrain", "stranger", delivery=f"stranger-{number}",
                association="NONE" if number % 2 else "COLLABORATOR")  # no role, or one GitHub is asked for
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert not fake_github.write_times() and not redis.exists(TURN_KEY.format(INSTALLATION))
    assert WriteSpacing(redis, 30.0).reserve(INSTALLATION) == 0.0


def test_a_maintainer_s_command_whose_answer_waits_for_its_turn_is_answered_as_decided(
        spaced_context, fake_github, client, payload, redis):
    """The command queued the retraining, then its acknowledgement waited for the installation's turn; the
    rescheduled job asked again, found the retraining it had just queued, and reacted "already queued" to
    the maintainer instead. The rerun carries the decision: it acknowledges, and asks GitHub nothing."""
    fake_github.add_issue(REPO, 1, "Model keeps calling questions bugs", "")
    WriteSpacing(redis, 30.0).reserve(INSTALLATION)  # another worker took installation 1's turn just now
    comment(client, payload, "/issue-sorter retrain", "boss", delivery="d-ack")
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert fake_github.comments(REPO, 1) == []
    asked = len(fake_github.requests)
    redis.delete(SLOT_KEY.format(INSTALLATION))  # its turn has come
    job = Job.fetch("handle_comment--d-ack--defer1", connection=redis, serializer=SERIALIZER)
    ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).remove(job)
    make_queue(redis, FEEDBACK_QUEUE).enqueue_job(job)
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert fake_github.reactions(REPO, COMMENT_ID) == []
    assert len(fake_github.comments(REPO, 1)) == 1 and "Retraining started" in fake_github.comments(REPO, 1)[0]
    assert [r.method for r in fake_github.requests[asked:] if r.path.startswith("/repos/")] == ["POST"]
