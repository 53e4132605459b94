"""RQ entry points of the training worker: retrain one scope, or every scope that is due (RQ cron)."""

from __future__ import annotations

import logging

from core.db import session_scope
from core.queues import REPLY_TO_RETRAIN, enqueue
from core.tables import GLOBAL_SCOPE
from trainer import context
from trainer.registry import Registry
from trainer.retrain import RetrainPolicy, retrain_scope, scopes_due

log = logging.getLogger(__name__)


def retrain(*, scope: str = GLOBAL_SCOPE, trigger: str = "manual", force: bool = False,
            reply_to: dict | None = None) -> dict:
    """Retrain one scope; with `reply_to` (a `/issue-sorter retrain` comment), the bot answers there."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        registry = Registry(ctx.settings.model_dir, session)
        result = retrain_scope(session, registry, scope, policy=RetrainPolicy.from_settings(ctx.settings),
                               force=force, trigger=trigger)
        outcome = result.to_dict()
        # each run writes a version of ~95 MB: those no scope serves or may roll back to go at once
        for row in registry.collect_garbage():
            log.info("deleted the files of model version %s (%s): neither serving nor kept for rollback",
                     row.version, row.scope)
    if reply_to:
        enqueue(ctx.redis, REPLY_TO_RETRAIN, {"reply_to": reply_to, "result": outcome})
    log.info("%s", result.message)
    return outcome


def retrain_due() -> str:
    """The periodic job: every scope with enough new confirmed decisions is retrained in turn."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        due = scopes_due(session, RetrainPolicy.from_settings(ctx.settings))
    results = [retrain(scope=scope, trigger="cron")["message"] for scope in due]
    return f"{len(due)} scopes due: " + "; ".join(results) if due else "nothing due"
