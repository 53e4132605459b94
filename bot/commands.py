"""Slash commands in issue comments: `/issue-sorter retrain` from a maintainer or an admin.

The command queues a retraining of the repository's model on the training queue (the trainer runs
it) and acknowledges; when training is done, the trainer queues `reply_to_retrain` with the result,
which answers in the same issue with both scores (`retrain_reply`).
"""

from __future__ import annotations

import hashlib
import re

from redis import Redis

from core.queues import RETRAIN, enqueue

RETRAIN_COMMAND = re.compile(r"^/issue-sorter\s+retrain\b")  # the first line of the comment
RETRAIN_ROLES = ("admin", "maintain")
ACKNOWLEDGEMENT = "Retraining started. I will answer here with the old and new scores."
REPLY_MARKER = "<!-- issue-sorter:retrain -->"


def is_command(body: str, *, commenter_is_bot: bool) -> bool:
    """Only people give commands; a bot quoting one (ours included) does not."""
    return not commenter_is_bot and bool(RETRAIN_COMMAND.match(body.strip()))


def handle_retrain_command(event: dict, github, redis: Redis) -> str:
    """Ask GitHub for the commenter's role; queue the retraining and say so, or refuse briefly."""
    repo, login = event["repo"], event["commenter_login"]
    role = github.get_permission(repo, login)
    if role not in RETRAIN_ROLES:
        github.create_comment(repo, event["number"], f"@{login} only maintainers and admins of this "
                                                     "repository can ask Issue Sorter to retrain.")
        return f"refused: {login} has {role} permission"
    reply_to = {"installation_id": event.get("installation_id"), "repo": repo, "number": event["number"]}
    enqueue(redis, RETRAIN, {"scope": repo, "trigger": "comment", "reply_to": reply_to},
            job_id=f"retrain--{hashlib.sha256(event['delivery_id'].encode()).hexdigest()[:24]}")
    github.create_comment(repo, event["number"], ACKNOWLEDGEMENT)
    return f"retraining queued for {repo} by {login} ({role})"


def retrain_reply(result: dict) -> str:
    """The answer under the command: the training job's summary (old score, new score, promoted or not)."""
    return f"{REPLY_MARKER}\n{result['summary']}"
