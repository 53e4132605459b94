"""RQ entry points of the training worker: retrain one scope, or every scope that is due (RQ cron); promote,
roll back; gate the engines a first model left pending."""

from __future__ import annotations

import logging
import time

from redis import Redis

from core import metrics
from core.db import session_scope
from core.queues import CRASH_RETRY, GATE_PENDING, REPLY_TO_RETRAIN, enqueue, is_job_pending
from core.tables import GLOBAL_SCOPE
from trainer import context
from trainer.dataset import load_database
from trainer.fast_path import default_gate_issues, gate_pending, pending_engines
from trainer.gate import NOT_PROMOTED, compare_and_promote, verdict
from trainer.registry import Model, Registry, RegistryError
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


def queue_pending_gates(redis: Redis, model: Model) -> list[str]:
    """Hand the engines `model`'s registration left pending to the training worker (`gate_pending_engines`),
    unless its job is queued or running already; the engines pending (none: nothing is queued)."""
    pending = pending_engines(model.card)
    if not pending:  # the usual case at every start: Redis is not asked
        return []
    job_id = f"{GATE_PENDING.short_name}--{model.version}"
    if not is_job_pending(redis, job_id):
        # one job per version at a time; a stop that kills it mid-run: the next training worker retries it
        enqueue(redis, GATE_PENDING, {"version": model.version}, job_id=job_id, retry=CRASH_RETRY)
    return pending


def gate_pending_engines(*, version: str) -> str:
    """Gate the engines `version`'s registration left pending (`issue-sorter run`'s first model gates only
    the engine this CPU serves), on the issues its registration gated on: workers on other CPUs then find
    theirs allowed. A version gone, or with nothing pending, is said, not a failed job."""
    ctx = context.current()
    issues, source = default_gate_issues()
    try:
        with Registry.open(ctx.settings.model_dir, ctx.sessionmaker) as registry:
            model = registry.model(version)
            if not issues:  # deferred only where they were there: ../shared moved since
                return f"{version}: pending gates not run: NLBSE'24's test split, their issues, is gone"
            card = gate_pending(model, issues, source=source)
    except RegistryError as error:
        return f"{version}: pending gates not run: {error}"
    gates = card.fast_path.get("gates", {})
    return f"{version}: " + ", ".join(f"{engine} {'passed' if gate.get('passed') else 'refused'}"
                                      for engine, gate in gates.items() if "top_label_agreement" in gate)
