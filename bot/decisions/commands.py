"""Slash commands in issue comments: `/issue-sorter retrain` from a maintainer or an admin.

The command queues a retraining of the repository's model on the training queue (the trainer runs
it) and acknowledges; when training is done, the trainer queues `reply_to_retrain` with the result,
which answers in the same issue with both scores (`retrain_reply`). One retraining per repository at a
time, and at most one an hour: each writes a model version of about 95 MB. Refusals are reactions on
the command's comment, never a reply: a reply would @-mention its sender, for anyone to trigger.
"""

from __future__ import annotations

import hashlib
import re

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from core.queues import RETRAIN, SERIALIZER, enqueue

RETRAIN_COMMAND = re.compile(r"^/issue-sorter\s+retrain\b")  # the first line of the comment
RETRAIN_ROLES = ("admin", "maintain")
ACKNOWLEDGEMENT = "Retraining started. I will answer here with the old and new scores."
REPLY_MARKER = "<!-- issue-sorter:retrain -->"
RETRAIN_COOLDOWN_SECONDS = 3600  # after a command queues a retraining, the next one waits this long
ACTION_COOLDOWN_KEY = "issue-sorter:{}-cooldown:{}"  # SET NX per action and scope, expiring with the cooldown
COOLDOWN_KEY = ACTION_COOLDOWN_KEY.format("retrain", "{}")  # the retraining's, per scope
PENDING = (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED)
NOT_ALLOWED = "-1"  # the reaction to a command from someone without admin or maintain permission
ALREADY_QUEUED = "confused"  # the reaction to a command while one is queued, running or cooling down


def is_command(body: str, *, commenter_is_bot: bool) -> bool:
    """Only people give commands; a bot quoting one (ours included) does not."""
    return not commenter_is_bot and bool(RETRAIN_COMMAND.match(body.strip()))


def _scope_hash(scope: str) -> str:
    return hashlib.sha256(scope.encode()).hexdigest()[:24]


def scope_job_id(action: str, scope: str) -> str:
    """One job id per action and scope, so a second request finds the first one's job."""
    return f"{action}--{_scope_hash(scope)}"


def retrain_job_id(scope: str) -> str:
    """The retraining's id, shared by the command and the review page's button."""
    return scope_job_id("retrain", scope)


def claim_scope_job(redis: Redis, action: str, scope: str, who: str, cooldown_seconds: int) -> bool:
    """True when `who` may queue `action` for `scope` now: none is queued or running, and none was queued
    in the last `cooldown_seconds` (the claim starts the cooldown). The command and the review page share
    it, so neither can queue a second run of the same action beside the other's."""
    if is_job_pending(redis, scope_job_id(action, scope)):
        return False
    return bool(redis.set(cooldown_key(action, scope), who, nx=True, ex=cooldown_seconds))


def cooldown_key(action: str, scope: str) -> str:
    return ACTION_COOLDOWN_KEY.format(action, _scope_hash(scope))


def handle_retrain_command(event: dict, github, redis: Redis) -> str:
    """Ask GitHub for the commenter's role; queue the retraining and say so, or refuse with a reaction."""
    repo, login = event["repo"], event["commenter_login"]
    role = github.get_permission(repo, login)
    if role not in RETRAIN_ROLES:
        _react(github, event, NOT_ALLOWED)
        return f"refused: {login} has {role} permission"
    job_id = retrain_job_id(repo)
    if not claim_scope_job(redis, "retrain", repo, login, RETRAIN_COOLDOWN_SECONDS):
        _react(github, event, ALREADY_QUEUED)
        return f"refused: a retraining of {repo} is already queued, running or less than an hour old"
    reply_to = {"installation_id": event.get("installation_id"), "repo": repo, "number": event["number"]}
    enqueue(redis, RETRAIN, {"scope": repo, "trigger": "comment", "reply_to": reply_to}, job_id=job_id)
    github.create_comment(repo, event["number"], ACKNOWLEDGEMENT)
    return f"retraining queued for {repo} by {login} ({role})"


def is_job_pending(redis: Redis, job_id: str) -> bool:
    try:
        return Job.fetch(job_id, connection=redis, serializer=SERIALIZER).get_status() in PENDING
    except NoSuchJobError:
        return False


def _react(github, event: dict, content: str) -> None:
    if event.get("comment_id") is not None:  # jobs queued before comment ids travelled have none
        github.react_to_comment(event["repo"], event["comment_id"], content)


def retrain_reply(result: dict) -> str:
    """The answer under the command: the training job's summary (old score, new score, promoted or not)."""
    return f"{REPLY_MARKER}\n{result['summary']}"
