"""Slash commands in issue comments: `/issue-sorter retrain` from a maintainer or an admin.

The command queues a retraining of the repository's model on the training queue and acknowledges; the trainer
answers in the same issue with both scores (`reply_to_retrain`, `retrain_reply`). One retraining per repository
at a time, and at most one an hour: each writes a model version of about 95 MB. A command from anyone else is
not answered at all (a stranger's comments cost the installation nothing but, for a collaborator, one permission
read); a refused maintainer's gets a reaction on the comment, never a reply: a reply would @-mention its sender.
"""

from __future__ import annotations

import hashlib
import re

from redis import Redis

from core.queues import RETRAIN, enqueue, is_job_pending

RETRAIN_COMMAND = re.compile(r"^/issue-sorter\s+retrain\b")  # the first line of the comment
RETRAIN_ROLES = ("admin", "maintain")
ACKNOWLEDGEMENT = "Retraining started. I will answer here with the old and new scores."
REPLY_MARKER = "<!-- issue-sorter:retrain -->"
RETRAIN_COOLDOWN_SECONDS = 3600  # after a command queues a retraining, the next one waits this long
ACTION_COOLDOWN_KEY = "issue-sorter:{}-cooldown:{}"  # SET NX per action and scope, expiring with the cooldown
COOLDOWN_KEY = ACTION_COOLDOWN_KEY.format("retrain", "{}")  # the retraining's, per scope
# GitHub's author_association of a commenter who may hold a role on the repository; anyone else holds none
MAY_HOLD_A_ROLE = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
QUEUED = "retrain_queued"  # set in the job's arguments once the command queued its retraining
ALREADY_QUEUED = "confused"  # the reaction to a command while one is queued, running or cooling down


def is_command(body: str, *, commenter_is_bot: bool) -> bool:
    """Only people give commands; a bot quoting one (ours included) does not."""
    return not commenter_is_bot and bool(RETRAIN_COMMAND.match(body.strip()))


def _scope_hash(scope: str) -> str:
    return hashlib.sha256(scope.encode()).hexdigest()[:24]


def scope_job_id(action: str, scope: str) -> str:
    """One job id per action and scope, so a second request finds the first one's job (the retraining's: the
    command's and the review page's button's alike)."""
    return f"{action}--{_scope_hash(scope)}"


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
    """Ask GitHub for the commenter's role (cached: bot.github_api.cache); queue the retraining and say so,
    refuse a maintainer's with a reaction, anyone else's with nothing at all."""
    repo, login = event["repo"], event["commenter_login"]
    if event.get(QUEUED):  # a rerun at its write turn: decided and queued already, only the answer is left
        github.create_comment(repo, event["number"], ACKNOWLEDGEMENT)
        return f"retraining queued for {repo} by {login}"
    association = event.get("commenter_association")
    if association is not None and association not in MAY_HOLD_A_ROLE:
        return f"refused: {login} is no collaborator of {repo} ({association}); nothing asked, nothing written"
    role = github.get_permission(repo, login)
    if role not in RETRAIN_ROLES:
        return f"refused: {login} has {role} permission; nothing written"
    if not claim_scope_job(redis, "retrain", repo, login, RETRAIN_COOLDOWN_SECONDS):
        if event.get("comment_id") is not None:  # jobs queued before comment ids travelled have none
            github.react_to_comment(repo, event["comment_id"], ALREADY_QUEUED)
        return f"refused: a retraining of {repo} is already queued, running or less than an hour old"
    reply_to = {"installation_id": event.get("installation_id"), "repo": repo, "number": event["number"]}
    enqueue(redis, RETRAIN, {"scope": repo, "trigger": "comment", "reply_to": reply_to},
            job_id=scope_job_id("retrain", repo))
    event[QUEUED] = True  # the job's arguments: a rerun for the answer's write turn carries the decision
    github.create_comment(repo, event["number"], ACKNOWLEDGEMENT)
    return f"retraining queued for {repo} by {login} ({role})"


def retrain_reply(result: dict) -> str:
    """The answer under the command: the training job's summary (old score, new score, promoted or not)."""
    return f"{REPLY_MARKER}\n{result['summary']}"
