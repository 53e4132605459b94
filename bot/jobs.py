"""RQ entry points of the bot's workers: each reads the WorkerContext and hands over to the domain.

Jobs take the plain fields of a delivery (bot.events) as keyword arguments, named in the contract
(core.queues). `_once` is their one boundary: a delivery is processed once, GitHub's transient errors
reschedule it at the time GitHub asks for, permanent ones are recorded and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot import backfill, commands, context, feedback, labeling, queueing, redelivery
from bot.context import WorkerContext
from bot.github_client import GitHubError, PermanentGitHubError, TransientGitHubError
from bot.issues import IssueSnapshot
from bot.repo_config import config_for
from bot.serving import NO_MODEL
from core import store
from core.db import session_scope
from core.queues import (
    BACKFILL_REPOSITORY,
    CRASH_RETRY,
    HANDLE_COMMENT,
    LABEL_ISSUE,
    RECORD_ISSUE_EVENT,
    JobSpec,
    enqueue,
)
from core.tables import WebhookDelivery

log = logging.getLogger(__name__)
OUTCOME_CHARS = WebhookDelivery.__table__.c.outcome.type.length  # PostgreSQL refuses longer outcomes


def label_issue(**event) -> str:
    """issues.opened: classify the issue and put the matching label on it."""
    return _once(LABEL_ISSUE, event, _label_issue)


def record_issue_event(**event) -> str:
    """issues.labeled/unlabeled/edited/closed/...: store the event and the decision it implies."""
    return _once(RECORD_ISSUE_EVENT, event, _record_issue_event)


def handle_comment(**event) -> str:
    """issue_comment.created: `/issue-sorter retrain` from someone with admin or maintain permission."""
    return _once(HANDLE_COMMENT, event, _handle_comment)


def backfill_installation(**event) -> str:
    """installation.created / installation_repositories.added: backfill every repository named."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        backfill.register_installation(session, event["installation_id"], event.get("account_login"),
                                       event["repos"])
    for repo in event["repos"]:
        enqueue(ctx.redis, BACKFILL_REPOSITORY, {"installation_id": event["installation_id"], "repo": repo},
                retry=CRASH_RETRY)
    return f"backfill queued for {len(event['repos'])} repositories"


def backfill_repository(*, installation_id: int, repo: str, max_issues: int | None = None) -> str:
    """Page through a repository's labelled issues into the database (bounded, resumable)."""
    ctx = context.current()
    github = ctx.github(installation_id)
    if github is None:
        return "skipped: dry-run cannot read GitHub"
    kwargs = {"installation_id": installation_id, "repo": repo, "max_issues": max_issues}
    try:
        return backfill.backfill(ctx.sessionmaker, github, repo, installation_id=installation_id,
                                 max_issues=max_issues or ctx.backfill_max_issues)
    except TransientGitHubError as error:  # resumes from the saved page
        return _reschedule(ctx, BACKFILL_REPOSITORY, kwargs, error)
    except GitHubError as error:
        log.warning("backfill of %s stopped: %s", repo, error)
        return f"stopped: {error}"


def reply_to_retrain(*, reply_to: dict, result: dict) -> str:
    """Answer a `/issue-sorter retrain` comment with the result the training worker sent back."""
    ctx = context.current()
    github = ctx.github(reply_to["installation_id"])
    reply = commands.retrain_reply(result)
    if github is not None:
        github.create_comment(reply_to["repo"], reply_to["number"], reply)
    return reply


def redeliver_failed(*, max_asks: int = redelivery.MAX_ASKS) -> str:
    """Cron: ask GitHub to redeliver the failed deliveries of its three-day window we never processed."""
    ctx = context.current()
    if ctx.github_app is None:
        return "skipped: dry-run cannot list the App's webhook deliveries"
    result = redelivery.sweep(ctx.github_app, redelivery.Ledger(ctx.redis, ctx.sessionmaker), limit=max_asks)
    for delivery in result.asked:
        log.info("asked GitHub to redeliver %s", delivery.describe())
    if result.stopped:
        log.warning("redelivery sweep stopped: %s", result.stopped)
    return result.summary()


def _once(spec: JobSpec, event: dict, work: Callable[[WorkerContext, dict], str]) -> str:
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        if store.is_delivery_processed(session, event["delivery_id"]):
            return "skipped: delivery already processed"
    try:
        outcome = work(ctx, event)
    except TransientGitHubError as error:
        return _reschedule(ctx, spec, event, error)
    except PermanentGitHubError as error:
        outcome = f"dropped: GitHub answered {error.status} ({error})"
        log.warning("%s#%s (delivery %s) %s", event.get("repo"), event.get("number"), event["delivery_id"], outcome)
    with session_scope(ctx.sessionmaker) as session:
        store.mark_delivery_processed(session, event["delivery_id"], spec.short_name, event.get("action"),
                                      outcome[:OUTCOME_CHARS])
    return outcome


def _reschedule(ctx: WorkerContext, spec: JobSpec, kwargs: dict, error: TransientGitHubError) -> str:
    return queueing.reschedule(ctx.redis, spec, kwargs, delay=error.retry_after, base_seconds=ctx.retry_base_seconds,
                               max_attempts=ctx.max_attempts, why=error)


def _label_issue(ctx: WorkerContext, event: dict) -> str:
    repo, number = event["repo"], event["number"]
    github = ctx.github(event.get("installation_id"))
    issue = github.get_issue(repo, number) if github else IssueSnapshot.from_job(event["snapshot"])
    classifier = ctx.models.for_repository(repo)
    if classifier is None:
        raise RuntimeError(NO_MODEL)
    policy = labeling.policy_for(ctx.settings, config_for(github, repo, number=number, redis=ctx.redis),
                                 classifier, dry_run=github is None)
    with session_scope(ctx.sessionmaker) as session:
        result = labeling.classify_and_label(session, repo=repo, number=number, issue=issue, github=github,
                                             classifier=classifier, policy=policy, delivery_id=event["delivery_id"],
                                             installation_id=event.get("installation_id"),
                                             checkpoint=session.commit)  # the decision outlives a crash
    return f"skipped: {result}" if isinstance(result, str) else result.outcome


def _record_issue_event(ctx: WorkerContext, event: dict) -> str:
    with session_scope(ctx.sessionmaker) as session:
        return feedback.record_issue_event(session, event, bot_login=ctx.settings.bot_login,
                                           app_id=ctx.settings.app_id)


def _handle_comment(ctx: WorkerContext, event: dict) -> str:
    if not commands.is_command(event["body"], commenter_is_bot=event.get("commenter_is_bot", False)):
        return "ignored: not a command"
    github = ctx.github(event.get("installation_id"))
    if github is None:
        return "ignored: dry-run cannot check permissions"
    return commands.handle_retrain_command(event, github, ctx.redis)
