"""RQ entry points. Each reads the WorkerContext, opens a transaction and calls the domain.

Jobs take the plain fields of a delivery (bot.events) as keyword arguments and re-read what they
need; GitHub's transient errors reschedule the job at the time GitHub asks for (`reschedule`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import timedelta
from types import SimpleNamespace

from rq import Queue, get_current_job

from bot import context, feedback, store
from bot.db import session_scope
from bot.github_client import GitHubError, PermanentGitHubError, TransientGitHubError
from bot.labeling import LabelingPolicy, classify_and_label
from bot.models import GLOBAL_SCOPE, WebhookDelivery
from bot.queueing import CRASH_RETRY, FEEDBACK_QUEUE, TRAINING_QUEUE, make_queue
from bot.repo_config import RepoConfig, load_config

log = logging.getLogger(__name__)
NO_MODEL = "no model is promoted: run `issue-sorter bootstrap-model` (or `issue-sorter train FILE --promote`)"
RETRAIN_COMMAND = re.compile(r"^/issue-sorter\s+retrain\b")  # the first line of the comment
RETRAIN_ROLES = ("admin", "maintain")
CONFIG_WARNING_KEY = "issue-sorter:config-warned:{}:{}"
OUTCOME_CHARS = WebhookDelivery.__table__.c.outcome.type.length  # PostgreSQL refuses longer outcomes


def label_issue(**event) -> str:
    """issues.opened: classify the issue and put the matching label on it."""
    return _guarded(_label_issue, "bot.jobs.label_issue", event)


def record_issue_event(**event) -> str:
    """issues.labeled/unlabeled/edited/closed/...: store the event and the decision it implies."""
    return _guarded(_record_issue_event, "bot.jobs.record_issue_event", event)


def handle_comment(**event) -> str:
    """issue_comment.created: `/issue-sorter retrain` from someone with admin or maintain permission."""
    return _guarded(_handle_comment, "bot.jobs.handle_comment", event)


def _guarded(work, func: str, event: dict) -> str:
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        if store.is_delivery_processed(session, event["delivery_id"]):
            return "skipped: delivery already processed"
    try:
        outcome = work(ctx, event)
    except TransientGitHubError as error:
        return reschedule(ctx, func, event, error)
    except PermanentGitHubError as error:
        outcome = f"dropped: GitHub answered {error.status} ({error})"
        log.warning("%s#%s (delivery %s) %s", event.get("repo"), event.get("number"), event["delivery_id"], outcome)
    with session_scope(ctx.sessionmaker) as session:
        store.mark_delivery_processed(session, event["delivery_id"], func.rsplit(".", 1)[-1],
                                      event.get("action"), outcome[:OUTCOME_CHARS])
    return outcome


def _github(ctx: context.WorkerContext, event: dict):
    if ctx.github_for is None:
        return None
    if not event.get("installation_id"):
        raise PermanentGitHubError("the delivery names no installation", status=None)
    return ctx.github_for(event["installation_id"])


def _label_issue(ctx: context.WorkerContext, event: dict) -> str:
    repo, number = event["repo"], event["number"]
    github = _github(ctx, event)
    issue = github.get_issue(repo, number) if github else SimpleNamespace(**event["snapshot"])
    classifier = ctx.models.get(repo) or ctx.models.get(GLOBAL_SCOPE)
    if classifier is None:
        raise RuntimeError(NO_MODEL)
    config = _repo_config(ctx, github, repo, number)
    with session_scope(ctx.sessionmaker) as session:
        result = classify_and_label(session, repo=repo, number=number, issue=issue, github=github,
                                    classifier=classifier, policy=policy_for(ctx, config, classifier),
                                    delivery_id=event["delivery_id"], installation_id=event.get("installation_id"))
    return f"skipped: {result}" if isinstance(result, str) else result.outcome


def policy_for(ctx: context.WorkerContext, config: RepoConfig, classifier) -> LabelingPolicy:
    thresholds: dict[str, float] = {}
    card = getattr(classifier, "card", None)
    if config.target_precision is not None and card is not None and card.thresholds:
        thresholds = {label: float(t) for label, t in card.thresholds.items()}
    return LabelingPolicy(threshold=config.threshold if config.threshold is not None else ctx.settings.threshold,
                          create_labels=ctx.settings.create_labels, dry_run=ctx.github_for is None,
                          mode=config.mode, label_names=config.labels, allow=config.allow,
                          per_label_thresholds=thresholds, comment_template=config.comment_template,
                          skip_authors=config.skip_authors)


def _repo_config(ctx: context.WorkerContext, github, repo: str, number: int) -> RepoConfig:
    """The repository's config; a broken file is reported (once a day) and never stops labelling."""
    try:
        config, problems = load_config(github, repo)
    except PermanentGitHubError as error:
        log.warning("%s: cannot read the config file (%s); using defaults", repo, error)
        return RepoConfig()
    if problems:
        message = "Issue Sorter could not use " + config.source + ", so it runs with safe defaults:\n" + \
                  "\n".join(f"- {p}" for p in problems)
        log.warning("%s", message)
        digest = hashlib.sha256(message.encode()).hexdigest()[:16]
        if config.wants_comments and github and ctx.redis.set(CONFIG_WARNING_KEY.format(repo, digest), 1,
                                                              nx=True, ex=86400):
            github.create_comment(repo, number, "<!-- issue-sorter:config -->\n" + message)
    return config


def _record_issue_event(ctx: context.WorkerContext, event: dict) -> str:
    snapshot = SimpleNamespace(**event["snapshot"])
    actor = feedback.identify_actor(event.get("sender_login"), event.get("sender_is_bot", False),
                                    event.get("via_app_id"), bot_login=ctx.settings.bot_login,
                                    app_id=ctx.settings.app_id)
    with session_scope(ctx.sessionmaker) as session:
        if feedback.is_event_recorded(session, event["delivery_id"]):  # a worker died before marking it done
            return "skipped: event already recorded"
        repository = store.ensure_repository(session, event["repo"], event.get("installation_id"))
        deleted = event["action"] == "deleted"
        state = {"deleted": "deleted", "transferred": "transferred"}.get(event["action"], snapshot.state)
        issue = store.upsert_issue(session, repository, event["number"], title="" if deleted else snapshot.title,
                                   body="" if deleted else snapshot.body, author_login=snapshot.author_login,
                                   state=state)
        if deleted:  # the issue is gone from GitHub: keep nothing of its text, and no training label
            issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
        serving = store.serving_model_version(session, event["repo"]) or store.serving_model_version(session)
        return feedback.record_label_event(
            session, issue, action=event["action"], label=event.get("label"), actor=actor,
            delivery_id=event["delivery_id"], current_labels=tuple(snapshot.labels),
            classes=list(serving.labels) if serving else [])


def _handle_comment(ctx: context.WorkerContext, event: dict) -> str:
    if event.get("commenter_is_bot") or not RETRAIN_COMMAND.match(event["body"].strip()):
        return "ignored: not a command"
    github = _github(ctx, event)
    if github is None:
        return "ignored: dry-run cannot check permissions"
    role = github.get_permission(event["repo"], event["commenter_login"])
    if role not in RETRAIN_ROLES:
        github.create_comment(event["repo"], event["number"],
                              f"@{event['commenter_login']} only maintainers and admins of this repository can "
                              "ask Issue Sorter to retrain.")
        return f"refused: {event['commenter_login']} has {role} permission"
    make_queue(ctx.redis, TRAINING_QUEUE).enqueue(
        "trainer.jobs.retrain", kwargs={"scope": event["repo"], "trigger": "comment", "reply_to": {
            "installation_id": event.get("installation_id"), "repo": event["repo"], "number": event["number"]}},
        job_id=f"retrain--{hashlib.sha256(event['delivery_id'].encode()).hexdigest()[:24]}")
    github.create_comment(event["repo"], event["number"],
                          "Retraining started. I will answer here with the old and new scores.")
    return f"retraining queued for {event['repo']} by {event['commenter_login']} ({role})"


def backfill_installation(**event) -> str:
    """installation.created / installation_repositories.added: backfill every repository named."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        store.ensure_installation(session, event["installation_id"], event.get("account_login"))
        for repo in event["repos"]:
            store.ensure_repository(session, repo, event["installation_id"])
    queue = make_queue(ctx.redis, FEEDBACK_QUEUE)
    for repo in event["repos"]:
        queue.enqueue("bot.jobs.backfill_repository", kwargs={"installation_id": event["installation_id"],
                                                              "repo": repo}, retry=CRASH_RETRY)
    return f"backfill queued for {len(event['repos'])} repositories"


def backfill_repository(*, installation_id: int, repo: str, max_issues: int | None = None) -> str:
    """Page through a repository's labelled issues into the database (bounded, resumable)."""
    from bot.backfill import backfill

    ctx = context.current()
    github = ctx.github_for(installation_id) if ctx.github_for else None
    if github is None:
        return "skipped: dry-run cannot read GitHub"
    try:
        report = backfill(ctx.sessionmaker, github, repo, installation_id=installation_id,
                          max_issues=max_issues or ctx.backfill_max_issues)
    except TransientGitHubError as error:  # resumes from the saved page
        return reschedule(ctx, "bot.jobs.backfill_repository", {"installation_id": installation_id,
                                                               "repo": repo, "max_issues": max_issues}, error)
    except GitHubError as error:
        log.warning("backfill of %s stopped: %s", repo, error)
        return f"stopped: {error}"
    return report


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
