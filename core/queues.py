"""The job contract between the processes: queue names, job names and the arguments each job takes.

The web process, the bot's workers and the training worker never import each other's job functions:
they enqueue by the names below, so enqueueing never loads a worker's code (nor torch). Each name is an
import path that tests/test_job_contract.py imports and checks against its signature, so a rename
fails a test instead of failing in production.

Jobs are JSON in Redis (SERIALIZER), never pickles: everything that writes or reads a job (queues, workers,
registries, the cron scheduler) takes it from here. An issue's title and body never sit in a job: they
travel beside it under JOB_TEXT_KEY, which the job deletes when it ends, however it ends (`job_text`).
A failed, retried or rescheduled job so carries ids only, and reads the issue again from GitHub.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from redis import Redis
from rq import Queue, Retry
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

LABELING_QUEUE = "labeling"  # issues to classify and label: latency matters
FEEDBACK_QUEUE = "feedback"  # label decisions, comments, backfills, replies: cheap, order-insensitive
TRAINING_QUEUE = "training"  # fine-tuning runs: minutes each, one at a time, on the training worker
BOT_QUEUES = (LABELING_QUEUE, FEEDBACK_QUEUE)  # what `issue-sorter worker` serves: one per process
QUEUES = (*BOT_QUEUES, TRAINING_QUEUE)
JOB_TIMEOUT = {LABELING_QUEUE: 300, FEEDBACK_QUEUE: 1800, TRAINING_QUEUE: 6 * 3600}  # seconds
# A job that crashed (DB restarting, worker killed) is retried by RQ; GitHub's own transient errors
# are rescheduled by the job itself at the time GitHub asks for (bot.intake.queueing.reschedule).
CRASH_RETRY = Retry(max=3, interval=[10, 60, 300])
SERIALIZER = JSONSerializer  # of every job's data, meta and result: what Redis holds cannot run code when read
KEEP_SECONDS = 7 * 24 * 3600  # the most a job stays in Redis: queued or scheduled (RQ's ttl) and failed
# An issue's text beside its job, deleted when the job ends; expiring first, a queued job reads GitHub.
JOB_TEXT_KEY = "issue-sorter:job-text:{}"  # job id → JSON {"snapshot.title": ..., "snapshot.body": ...}
JOB_TEXT_TTL = 24 * 3600


@dataclass(frozen=True)
class JobSpec:
    """One job: where it runs and the keyword arguments every caller passes."""

    name: str  # import path of the job function
    queue: str
    arguments: frozenset[str]  # keyword arguments it must accept (callers may pass more, with defaults)
    text: tuple[str, ...] = ()  # "argument.field" paths of issue text, kept out of the job (JOB_TEXT_KEY)
    # the receiver books its installation's next write turn and schedules it there (bot.intake.queueing)
    write_turn: bool = False

    @property
    def short_name(self) -> str:
        """The function's name: the prefix of job ids and the `event` of processed deliveries."""
        return self.name.rsplit(".", 1)[-1]


def _spec(name: str, queue: str, *arguments: str, text: tuple[str, ...] = (), write_turn: bool = False) -> JobSpec:
    return JobSpec(name, queue, frozenset(arguments), text, write_turn)


_DELIVERY = ("delivery_id", "installation_id", "repo", "number")  # what every issue delivery's job reads
_ISSUE_TEXT = ("snapshot.title", "snapshot.body")  # bot.github_api.issues.IssueSnapshot.to_job's text
LABEL_ISSUE = _spec("bot.jobs.label_issue", LABELING_QUEUE, *_DELIVERY, "action", "snapshot", text=_ISSUE_TEXT,
                    write_turn=True)
RECORD_ISSUE_EVENT = _spec("bot.jobs.record_issue_event", FEEDBACK_QUEUE, *_DELIVERY, "action", "snapshot",
                           "label", "sender_login", "sender_is_bot", "via_app_id", text=_ISSUE_TEXT)
# label.created/edited/deleted: on the labelling queue, so it is done before the issues delivered after it
REFRESH_LABELS = _spec("bot.jobs.refresh_labels", LABELING_QUEUE, "delivery_id", "installation_id", "repo",
                       "action", "label")
HANDLE_COMMENT = _spec("bot.jobs.handle_comment", FEEDBACK_QUEUE, *_DELIVERY, "commenter_login",
                       "commenter_is_bot", "body")
BACKFILL_INSTALLATION = _spec("bot.jobs.backfill_installation", FEEDBACK_QUEUE, "delivery_id",
                              "installation_id", "account_login", "repos")
BACKFILL_REPOSITORY = _spec("bot.jobs.backfill_repository", FEEDBACK_QUEUE, "installation_id", "repo")
# a repository's confirmed issues into its memory: never on the labelling queue (bot.decisions.memory_fill)
FILL_MEMORY = _spec("bot.jobs.fill_memory", FEEDBACK_QUEUE, "repo", "version")
UPDATE_REPOSITORY = _spec("bot.jobs.update_repository", FEEDBACK_QUEUE, "delivery_id", "action",
                          "installation_id", "repo", "repo_id", "private")
_INSTALLATION = ("delivery_id", "action", "installation_id", "repositories")
REMOVE_INSTALLATION = _spec("bot.jobs.remove_installation", FEEDBACK_QUEUE, *_INSTALLATION)
REMOVE_REPOSITORIES = _spec("bot.jobs.remove_repositories", FEEDBACK_QUEUE, *_INSTALLATION)
SUSPEND_INSTALLATION = _spec("bot.jobs.suspend_installation", FEEDBACK_QUEUE, *_INSTALLATION)
CLEAR_UNCONFIRMED = _spec("bot.jobs.clear_unconfirmed", FEEDBACK_QUEUE)  # cron: the retention of issue text
REPLY_TO_RETRAIN = _spec("bot.jobs.reply_to_retrain", FEEDBACK_QUEUE, "reply_to", "result")
# a maintainer decided the kind of an issue the bot marked with its abstain label: the mark comes off
TAKE_OFF_ABSTAIN_MARK = _spec("bot.jobs.take_off_abstain_mark", FEEDBACK_QUEUE, "installation_id", "repo", "number",
                              "label", "prediction_id")
REVIEW_PREDICTION = _spec("bot.jobs.review_prediction", FEEDBACK_QUEUE, "review_id", "installation_id",
                          "repo", "number", "prediction_id", "choice", "label", "reviewer_login")
REDELIVER_FAILED = _spec("bot.jobs.redeliver_failed", FEEDBACK_QUEUE)  # cron; a minute of asks at most
PREVIEW = _spec("bot.jobs.preview_repository", FEEDBACK_QUEUE, "repo")  # minutes of CPU: not labelling
# the repository's history replayed through the served decision, after its backfill (bot.labeling.backtest)
BACKTEST = _spec("bot.jobs.backtest_repository", FEEDBACK_QUEUE, "repo")
RETRAIN = _spec("trainer.jobs.retrain", TRAINING_QUEUE, "scope", "trigger")
PROMOTE = _spec("trainer.jobs.promote_version", TRAINING_QUEUE, "version", "scope", "requested_by")
ROLLBACK = _spec("trainer.jobs.rollback_scope", TRAINING_QUEUE, "scope", "requested_by")
RETRAIN_DUE = _spec("trainer.jobs.retrain_due", TRAINING_QUEUE)
# the engines `issue-sorter run`'s first model left ungated so that it served sooner (trainer.fast_path)
GATE_PENDING = _spec("trainer.jobs.gate_pending_engines", TRAINING_QUEUE, "version")
JOBS = (LABEL_ISSUE, REFRESH_LABELS, RECORD_ISSUE_EVENT, HANDLE_COMMENT, BACKFILL_INSTALLATION, BACKFILL_REPOSITORY,
        FILL_MEMORY, UPDATE_REPOSITORY, REMOVE_INSTALLATION, REMOVE_REPOSITORIES, SUSPEND_INSTALLATION,
        CLEAR_UNCONFIRMED, REPLY_TO_RETRAIN, REDELIVER_FAILED, REVIEW_PREDICTION, TAKE_OFF_ABSTAIN_MARK, PREVIEW,
        BACKTEST, RETRAIN, RETRAIN_DUE, PROMOTE, ROLLBACK, GATE_PENDING)


class NotAContractJob(RuntimeError):
    """A job in Redis names a function the contract does not: it fails instead of running."""


class ContractJob(Job):
    """RQ's Job that runs only the functions JOBS names. A job names its function by import path, and RQ
    would import and call any (`os.system`, with the job's JSON arguments): with this, whoever can write
    Redis can only ask for our own jobs. The workers use it (`job_class=`)."""

    NAMES = frozenset(spec.name for spec in JOBS)

    @property
    def func(self):
        callbacks = (self._success_callback_name, self._failure_callback_name, self._stopped_callback_name)
        if self.instance is not None or self.func_name not in self.NAMES or any(callbacks):
            raise NotAContractJob(f"job {self.id} asks for {self.func_name!r} (or a callback), which is not one "
                                  "of core.queues.JOBS: not run")
        return super().func


def make_queue(redis: Redis, name: str) -> Queue:
    """The RQ queue `name`, with its timeout and the jobs' serializer."""
    return Queue(name, connection=redis, default_timeout=JOB_TIMEOUT[name], serializer=SERIALIZER)


def job_options(**options: Any) -> dict[str, Any]:
    """RQ's options for one of our jobs: nothing of it outlives KEEP_SECONDS (RQ keeps failed jobs a year)."""
    return {"ttl": KEEP_SECONDS, "failure_ttl": KEEP_SECONDS, **options}


def enqueue(redis: Redis, spec: JobSpec, kwargs: dict[str, Any], *, at: dt.datetime | None = None,
            **options: Any) -> Job:
    """Enqueue `spec` on its queue (or schedule it `at` a time), its issue text beside it; a missing argument
    is an error here, not in the worker. With `pipeline=`, the text and the job are written by the same
    MULTI/EXEC."""
    missing = spec.arguments - kwargs.keys()
    if missing:
        raise TypeError(f"{spec.name} needs {', '.join(sorted(missing))}")
    kwargs, text = split_text(spec, kwargs)
    if text:
        options.setdefault("job_id", f"{spec.short_name}--{uuid.uuid4().hex}")
        target = redis if options.get("pipeline") is None else options["pipeline"]
        target.set(JOB_TEXT_KEY.format(options["job_id"]), json.dumps(text), ex=JOB_TEXT_TTL)
    queue = make_queue(redis, spec.queue)
    if at is not None:
        return queue.enqueue_at(at, spec.name, kwargs=kwargs, **job_options(**options))
    return queue.enqueue(spec.name, kwargs=kwargs, **job_options(**options))


def split_text(spec: JobSpec, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`kwargs` without the issue text `spec` names, and that text by path ({} when there is none)."""
    kwargs, text = dict(kwargs), {}
    for path in spec.text:
        argument, field = path.split(".")
        if isinstance(kwargs.get(argument), dict) and field in kwargs[argument]:
            kwargs[argument] = dict(kwargs[argument])
            text[path] = kwargs[argument].pop(field)
    return kwargs, text


def job_text(redis: Redis, spec: JobSpec, job_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A running job's arguments with its issue text put back, while JOB_TEXT_KEY still holds it; without
    it, a path's field is absent (the job reads the issue from GitHub). Call forget_text when the job ends."""
    stored = redis.get(JOB_TEXT_KEY.format(job_id))
    if not stored:
        return kwargs
    kwargs = dict(kwargs)
    for path, value in json.loads(stored).items():
        argument, field = path.split(".")
        if path in spec.text and isinstance(kwargs.get(argument), dict):
            kwargs[argument] = {**kwargs[argument], field: value}
    return kwargs


def forget_text(redis: Redis, job_id: str) -> None:
    """The job is over (done, failed, rescheduled): its issue text goes; a retry reads the issue again."""
    redis.delete(JOB_TEXT_KEY.format(job_id))


UNFINISHED = (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED)  # a retry waits SCHEDULED


def is_job_pending(redis: Redis, job_id: str) -> bool:
    """Whether the job `job_id` is waiting, running, or waiting to be retried: one of a kind at a time."""
    try:
        return Job.fetch(job_id, connection=redis, serializer=SERIALIZER).get_status() in UNFINISHED
    except NoSuchJobError:
        return False
