"""RQ entry points of the training worker: retrain one scope, or every scope that is due (RQ cron)."""

from __future__ import annotations

import logging
import time

from core import metrics
from core.db import session_scope
from core.queues import REPLY_TO_RETRAIN, enqueue
from core.tables import GLOBAL_SCOPE
from trainer import context
from trainer.dataset import load_database
from trainer.gate import NOT_PROMOTED, compare_and_promote, verdict
from trainer.registry import Registry, RegistryError
from trainer.retrain import RetrainPolicy, retrain_scope, scopes_due

log = logging.getLogger(__name__)


def retrain(*, scope: str = GLOBAL_SCOPE, trigger: str = "manual", force: bool = False,
            reply_to: dict | None = None) -> dict:
    """Retrain one scope; with `reply_to` (a `/issue-sorter retrain` comment), the bot answers there."""
    ctx = context.current()
    started = time.perf_counter()
    with Registry.open(ctx.settings.model_dir, ctx.sessionmaker) as registry:
        policy = RetrainPolicy.from_settings(ctx.settings, ctx.redis)
        result = retrain_scope(registry.session, registry, scope, policy=policy, force=force, trigger=trigger)
        outcome = result.to_dict()
        # each run writes a version of ~95 MB: those no scope serves or may roll back to go at once
        for row in registry.collect_garbage():
            log.info("deleted the files of model version %s (%s): neither serving nor kept for rollback",
                     row.version, row.scope)
    metrics.observe_job(ctx.redis, "retrain", time.perf_counter() - started)
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


def promote_version(*, version: str, scope: str, requested_by: str) -> str:
    """The review page's promote button: through the gate, on the scope's human-confirmed issues."""
    ctx = context.current()
    try:
        with Registry.open(ctx.settings.model_dir, ctx.sessionmaker) as registry:
            run = compare_and_promote(registry, registry.model(version, scope=scope),
                                      load_database(registry.session, scope), scope=scope, trigger="review")
            message = verdict(run)
    except RegistryError as error:  # unknown, or another scope's version: said on the page, not a failed job
        message = f"{NOT_PROMOTED}: {error}"
    log.info("%s asked to promote %s for %s: %s", requested_by, version, scope, message)
    return message


def rollback_scope(*, scope: str, requested_by: str) -> str:
    """The review page's rollback button: the version that served before the current one serves again."""
    ctx = context.current()
    try:
        with Registry.open(ctx.settings.model_dir, ctx.sessionmaker) as registry:
            message = f"{scope} now served by {registry.rollback(scope).model_version.version}"
    except RegistryError as error:  # nothing to roll back to: said, not a failed job
        message = f"not rolled back: {error}"
    log.info("%s rolled back %s: %s", requested_by, scope, message)
    return message
