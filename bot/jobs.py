"""RQ entry points. Each reads the WorkerContext, opens a transaction and calls the domain."""

from __future__ import annotations

import logging
from datetime import timedelta
from types import SimpleNamespace

from rq import Queue, get_current_job

from bot import context, store
from bot.db import session_scope
from bot.github_client import PermanentGitHubError, TransientGitHubError
from bot.labeling import classify_and_label
from bot.models import GLOBAL_SCOPE
from bot.queueing import CRASH_RETRY

log = logging.getLogger(__name__)
NO_MODEL = "no model is promoted: run `issue-sorter bootstrap-model` (or `issue-sorter train FILE --promote`)"


def label_issue(**event) -> str:
    """issues.opened: classify the issue and put the matching label on it."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        if store.is_delivery_processed(session, event["delivery_id"]):
            return "skipped: delivery already processed"
    try:
        return _label_issue(ctx, event)
    except TransientGitHubError as error:
        return reschedule(ctx, "bot.jobs.label_issue", event, error)
    except PermanentGitHubError as error:
        return _drop(ctx, event, f"dropped: GitHub answered {error.status} ({error})")


def _label_issue(ctx: context.WorkerContext, event: dict) -> str:
    repo, number = event["repo"], event["number"]
    github = None
    if ctx.github_for is not None:
        if not event.get("installation_id"):
            return _drop(ctx, event, "dropped: the delivery names no installation")
        github = ctx.github_for(event["installation_id"])
    issue = github.get_issue(repo, number) if github else SimpleNamespace(**event["snapshot"])
    classifier = ctx.models.get(repo) or ctx.models.get(GLOBAL_SCOPE)
    if classifier is None:
        raise RuntimeError(NO_MODEL)
    with session_scope(ctx.sessionmaker) as session:
        result = classify_and_label(session, repo=repo, number=number, issue=issue, github=github,
                                    classifier=classifier, policy=ctx.policy(),
                                    delivery_id=event["delivery_id"], installation_id=event.get("installation_id"))
        outcome = result if isinstance(result, str) else result.outcome
        outcome = f"skipped: {outcome}" if isinstance(result, str) else outcome
        store.mark_delivery_processed(session, event["delivery_id"], "issues", event.get("action"), outcome)
    return outcome


def _drop(ctx: context.WorkerContext, event: dict, outcome: str) -> str:
    log.warning("%s#%s (delivery %s) %s", event.get("repo"), event.get("number"), event["delivery_id"], outcome)
    with session_scope(ctx.sessionmaker) as session:
        store.mark_delivery_processed(session, event["delivery_id"], "issues", event.get("action"), outcome)
    return outcome


def reschedule(ctx: context.WorkerContext, func: str, kwargs: dict, error: TransientGitHubError) -> str:
    """Try again later without blocking the worker: at GitHub's reset time, or with doubling back-off."""
    job = get_current_job()
    attempt = int(job.meta.get("attempt", 1)) if job else 1
    if attempt >= ctx.max_attempts:
        log.error("giving up on %s after %d attempts: %s", kwargs.get("delivery_id"), attempt, error)
        return f"failed: GitHub kept failing ({error})"
    delay = error.retry_after if error.retry_after is not None else ctx.retry_base_seconds * 2 ** (attempt - 1)
    queue = Queue(job.origin if job else "labeling", connection=ctx.redis)
    base_id = (job.id if job else func.rsplit(".", 1)[-1]).split("--retry")[0]
    queue.enqueue_in(timedelta(seconds=max(0.0, delay)), func, kwargs=kwargs, job_id=f"{base_id}--retry{attempt}",
                     meta={"attempt": attempt + 1}, retry=CRASH_RETRY)
    log.warning("GitHub error %s on %s; retry %d in %.0f s", error.status, kwargs.get("delivery_id"), attempt, delay)
    return f"rescheduled in {delay:.0f} s"
