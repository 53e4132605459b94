"""The quality page's buttons as jobs: one queued or running per repository and action, a cooldown after each
(bot.decisions.commands' rule, shared with the slash command), and what became of the last one.

Each job has a fixed id per action and repository, so its RQ job is also its record: queued, running, then
its result (kept a week, `RESULT_TTL`), which says promoted or refused and why, in the trainer's words.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from bot.decisions import commands
from core.queues import (
    BACKTEST,
    KEEP_SECONDS,
    PREVIEW,
    PROMOTE,
    RETRAIN,
    ROLLBACK,
    SERIALIZER,
    JobSpec,
    enqueue,
    is_job_pending,
)

ACTIONS: dict[str, JobSpec] = {"retrain": RETRAIN, "promote": PROMOTE, "rollback": ROLLBACK,
                               "preview": PREVIEW, "backtest": BACKTEST}
# admin or maintain permission; the preview and the backtest are for triage too
MANAGING = ("retrain", "promote", "rollback")
COOLDOWN_SECONDS = {
    "retrain": commands.RETRAIN_COOLDOWN_SECONDS,  # a version of about 95 MB each: the command's hour
    "promote": 600,  # the gate scores two models on the repository's confirmed issues
    "rollback": 60,  # a double click must not roll back two versions
    "preview": 600,  # up to preview.MAX_ISSUES issues through the model, on the feedback worker
    "backtest": 1800,  # up to the backfill's issues replayed through the decision, on the feedback worker
}
RESULT_TTL = KEEP_SECONDS  # seconds the page shows a finished job's result
WAITING = (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


@dataclasses.dataclass(frozen=True)
class ActionState:
    """The last job of one action on one repository, as the page shows it."""

    action: str
    state: str  # queued | running | promoted | refused | done | failed
    detail: str  # the trainer's or the worker's own words; why, when refused
    at: dt.datetime | None  # queued, started or ended

    @property
    def pending(self) -> bool:
        return self.state in ("queued", "running")


class Refused(Exception):
    """The action is queued or running already, or cooling down; the message says until when."""


def queue_action(redis: Redis, action: str, repo: str, who: str, kwargs: dict[str, Any]) -> Job:
    """Queue `action` for `repo` under its fixed job id, or raise Refused."""
    if not commands.claim_scope_job(redis, action, repo, who, COOLDOWN_SECONDS[action]):
        raise Refused(_refusal(redis, action, repo))
    return enqueue(redis, ACTIONS[action], kwargs, job_id=commands.scope_job_id(action, repo),
                   result_ttl=RESULT_TTL)


def _refusal(redis: Redis, action: str, repo: str) -> str:
    if is_job_pending(redis, commands.scope_job_id(action, repo)):
        return f"A {action} of {repo} is queued or running already; the page shows it below."
    seconds = max(redis.ttl(commands.cooldown_key(action, repo)), 1)
    minutes = -(-seconds // 60)
    return (f"A {action} of {repo} was queued less than {COOLDOWN_SECONDS[action] // 60} minutes ago; "
            f"the next one may be queued in {minutes} minute{'' if minutes == 1 else 's'}.")


def states(redis: Redis, repo: str) -> dict[str, ActionState]:
    """{action: its last job's state} for the actions with a job still in Redis."""
    found = {}
    for action in ACTIONS:
        try:
            job = Job.fetch(commands.scope_job_id(action, repo), connection=redis, serializer=SERIALIZER)
        except NoSuchJobError:
            continue
        found[action] = describe(action, job)
    return found


def describe(action: str, job: Job) -> ActionState:
    status = job.get_status()
    if status in WAITING:
        return ActionState(action, "queued", "waiting for a worker", job.enqueued_at)
    if status == JobStatus.STARTED:
        return ActionState(action, "running", "", job.started_at)
    if status == JobStatus.FINISHED:
        state, detail = outcome(action, job.return_value())
        return ActionState(action, state, detail, job.ended_at)
    return ActionState(action, "failed", "the job failed; the operator page has its error", job.ended_at)


def outcome(action: str, result: Any) -> tuple[str, str]:
    """(promoted | refused | done, the words to show) from a finished job's return value."""
    if action == "retrain" and isinstance(result, dict):  # trainer.retrain.RetrainResult.to_dict
        if result.get("promoted"):
            return "promoted", result.get("summary", "")
        if result.get("challenger_score") is None:  # nothing was trained, or nothing to compare on
            return "refused", result.get("message", "")
        return "refused", result.get("summary", "")
    text = str(result or "")
    if action == "promote":
        return ("promoted" if text.startswith("promoted") else "refused"), text
    if text.startswith(("not ", "skipped")):
        return "refused", text
    return "done", text
