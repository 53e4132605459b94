"""RQ entry points of the trainer: retrain one scope, or every scope that is due (RQ cron)."""

from __future__ import annotations

import logging

from bot import context
from bot.db import session_scope
from bot.models import GLOBAL_SCOPE
from trainer.registry import Registry
from trainer.retrain import RetrainPolicy, RetrainResult, retrain_scope, scopes_due

log = logging.getLogger(__name__)


def retrain(*, scope: str = GLOBAL_SCOPE, trigger: str = "manual", force: bool = False,
            reply_to: dict | None = None) -> str:
    """Retrain one scope; answer the `/issue-sorter retrain` comment that asked for it, if any."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        result = retrain_scope(session, Registry(ctx.settings.model_dir, session), scope,
                               policy=policy_from(ctx), force=force, trigger=trigger)
        reply = result_comment(result)
    if reply_to and ctx.github_for is not None:
        github = ctx.github_for(reply_to["installation_id"])
        github.create_comment(reply_to["repo"], reply_to["number"], reply)
    log.info("%s", reply)
    return reply


def retrain_due() -> str:
    """The periodic job: every scope with enough new confirmed decisions is retrained in turn."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        due = scopes_due(session, policy_from(ctx))
    results = [retrain(scope=scope, trigger="cron") for scope in due]
    return f"{len(due)} scopes due: " + "; ".join(results) if due else "nothing due"


def policy_from(ctx: context.WorkerContext) -> RetrainPolicy:
    settings = ctx.settings
    return RetrainPolicy(min_new_decisions=settings.retrain_min_new, min_per_label=settings.repo_min_per_label,
                         epochs=settings.retrain_epochs, max_length=settings.retrain_max_length)


def result_comment(result: RetrainResult) -> str:
    """The answer posted under the comment: old score, new score, promoted or not."""
    run = result.run
    if run is None:
        return f"<!-- issue-sorter:retrain -->\nNo retraining: {result.message}."
    old = "none" if run.champion_score is None else f"{run.champion_score:.3f}"
    new = "none" if run.challenger_score is None else f"{run.challenger_score:.3f}"
    verdict = "promoted: it serves from now on" if run.promoted else "not promoted: the serving model stays"
    return (f"<!-- issue-sorter:retrain -->\nRetrained **{result.scope}** on {run.n_examples} held-out recent "
            f"issues: macro-F1 of the serving model {old}, of the new model {new}. New model {verdict}.")
