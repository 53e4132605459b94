"""RQ entry points of the bot's workers: each reads the WorkerContext and hands over to the domain.

Jobs take the plain fields of a delivery (bot.intake.events) as keyword arguments, named in the contract
(core.queues). `_once` is their one boundary: a delivery is processed once, GitHub's transient errors
reschedule it at the time GitHub asks for, permanent ones are recorded and dropped; the issue text that
travelled beside the job is put back for it, and deleted when it ends (a retry reads the issue again).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from rq import get_current_job

from bot import context
from bot.context import WorkerContext
from bot.decisions import act as decisions_act
from bot.decisions import commands, memory_fill
from bot.decisions import decide as decisions_decide
from bot.decisions import gather as decisions_gather
from bot.github_api.cache import CachedGitHub, forget_labels
from bot.github_api.client import GitHubError, PermanentGitHubError, TransientGitHubError
from bot.intake import queueing, redelivery
from bot.labeling import act as labeling_act
from bot.labeling import backtest, comments
from bot.labeling import decide as labeling_decide
from bot.labeling import gather as labeling_gather
from bot.labeling.serving import NO_MODEL
from bot.lifecycle import backfill, preview, repositories
from bot.review import decide as review_decide
from bot.review import model_jobs, pending
from core import metrics, queues, store
from core.db import session_scope
from core.tables import WebhookDelivery

log = logging.getLogger(__name__)
OUTCOME_CHARS = WebhookDelivery.__table__.c.outcome.type.length  # PostgreSQL refuses longer outcomes
SKIPPED_PROCESSED = "skipped: delivery already processed"


def label_issue(**event) -> str:
    """issues.opened: classify the issue and put the matching label on it."""
    return _once(queues.LABEL_ISSUE, event, _label_issue, records_itself=True)


def refresh_labels(**event) -> str:
    """label.created/edited/deleted: the repository's cached labels are stale; the next job lists them."""
    return _once(queues.REFRESH_LABELS, event, _forget_labels)


def record_issue_event(**event) -> str:
    """issues.labeled/unlabeled/edited/closed/...: store the event and the decision it implies."""
    return _once(queues.RECORD_ISSUE_EVENT, event, _record_issue_event)


def handle_comment(**event) -> str:
    """issue_comment.created: `/issue-sorter retrain` from someone with admin or maintain permission."""
    return _once(queues.HANDLE_COMMENT, event, _handle_comment)


def backfill_installation(**event) -> str:
    """installation.created / installation_repositories.added: backfill every repository named."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        backfill.register_installation(session, event["installation_id"], event.get("account_login"),
                                       event.get("repositories") or [{"repo": repo} for repo in event["repos"]])
    for repo in event["repos"]:
        queues.enqueue(ctx.redis, queues.BACKFILL_REPOSITORY, {"installation_id": event["installation_id"],
                                                                "repo": repo}, retry=queues.CRASH_RETRY)
    return f"backfill queued for {len(event['repos'])} repositories"


def backfill_repository(*, installation_id: int, repo: str, max_issues: int | None = None) -> str:
    """Page through a repository's labelled issues into the database (bounded, resumable)."""
    ctx = context.current()
    github = ctx.github(installation_id)
    if github is None:
        return "skipped: dry-run cannot read GitHub"
    kwargs = {"installation_id": installation_id, "repo": repo, "max_issues": max_issues}
    try:
        outcome = backfill.backfill(ctx.sessionmaker, github, repo, installation_id=installation_id,
                                    max_issues=max_issues or ctx.backfill_max_issues)
    except TransientGitHubError as error:  # resumes from the saved page
        return _reschedule(ctx, queues.BACKFILL_REPOSITORY, kwargs, error)
    except GitHubError as error:
        log.warning("backfill of %s stopped: %s", repo, error)
        outcome = f"stopped: {error}"
    if ctx.settings.memory:  # what was stored, stopped or not, goes into the memory
        memory_fill.queue_fill_by_serving(ctx.redis, ctx.sessionmaker, repo,
                                          limit=ctx.settings.max_queued_memory_fills)
    queue_backtest(ctx.redis, repo)
    return outcome


def queue_backtest(redis, repo: str) -> None:
    """After a backfill, the dry run on the repository's history, once: a report already stored is run again
    from the review page's button (one at a time, with its cooldown: bot.review.model_jobs)."""
    if backtest.REPORTS.last(redis, repo) is None:
        with contextlib.suppress(model_jobs.Refused):
            model_jobs.queue_action(redis, "backtest", repo, backfill.BACKFILL_ACTOR, {"repo": repo})


def backtest_repository(*, repo: str) -> str:
    """The repository's labelled history, as the backfill stored it, replayed through the served decision
    (bot.labeling.backtest); the report is kept for the review page. Bounded by the backfill's issues."""
    ctx = context.current()
    with session_scope(ctx.sessionmaker) as session:
        repository = store.find_repository(session, full_name=repo)
        installation_id = repository.installation_id if repository is not None else None
        issues = backtest.stored_history(session, repo, ctx.backfill_max_issues)
    github = _cached(ctx, installation_id)
    if github is None:
        return "skipped: dry-run cannot read the repository's config and labels"
    if len(issues) < 2:
        return f"skipped: {repo} has {len(issues)} labelled issue(s) stored; a backtest needs 2 or more"
    classifier = ctx.models.for_repository(repo)
    if classifier is None:
        return f"skipped: {NO_MODEL}"
    result = backtest.backtest(issues, repo=repo, classifier=classifier, settings=ctx.settings,
                               github=backtest.Remembering(github))
    backtest.REPORTS.store(ctx.redis, result)
    return backtest.summary(result)


def update_repository(**event) -> str:
    """repository.renamed / transferred / privatized / publicized: the repository's name and visibility."""
    return _once(queues.UPDATE_REPOSITORY, event, _lifecycle(lambda session, ctx, e: repositories.update_repository(
        session, e, ctx.github_app)))


def remove_installation(**event) -> str:
    """installation.deleted: purge the installation's data and models."""
    return _once(queues.REMOVE_INSTALLATION, event, _lifecycle(lambda session, ctx, e: repositories.remove_installation(
        session, e["installation_id"], ctx.settings.model_dir, ctx.github_app)))


def remove_repositories(**event) -> str:
    """installation_repositories.removed: purge those repositories' data and models."""
    return _once(queues.REMOVE_REPOSITORIES, event, _lifecycle(lambda session, ctx, e: repositories.remove_repositories(
        session, e["installation_id"], e["repositories"], ctx.settings.model_dir, ctx.github_app)))


def suspend_installation(**event) -> str:
    """installation.suspend / unsuspend: freeze (nothing labelled, data kept) or thaw the installation."""
    return _once(queues.SUSPEND_INSTALLATION, event, _lifecycle(
        lambda session, ctx, e: repositories.suspend_installation(
            session, e["installation_id"], suspended=e["action"] == "suspend", github=ctx.github_app)))


def clear_unconfirmed() -> str:
    """Cron: clear the text of issues nobody confirmed within ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS."""
    ctx = context.current()
    days = ctx.settings.unconfirmed_retention_days
    if days is None:
        return "skipped: no retention set"
    with session_scope(ctx.sessionmaker) as session:
        return f"cleared {repositories.clear_unconfirmed(session, older_than_days=days)} unconfirmed issues"


def _lifecycle(work: Callable) -> Callable[[WorkerContext, dict], str]:
    """An installation or repository event's work in one transaction; a purge's model directories and Redis
    copies go after the commit, so that no row is left pointing at a missing model or a Redis copy."""
    def run(ctx: WorkerContext, event: dict) -> str:
        with session_scope(ctx.sessionmaker) as session:
            done = work(session, ctx, event)
        if isinstance(done, repositories.Purged):
            repositories.delete_directories(done, ctx.redis)
            return done.summary()
        return done
    return run


def reply_to_retrain(*, reply_to: dict, result: dict) -> str:
    """Answer a `/issue-sorter retrain` comment with the result the training worker sent back."""
    ctx = context.current()
    github = ctx.github(reply_to["installation_id"])
    reply = commands.retrain_reply(result)
    if github is not None:
        try:
            github.create_comment(reply_to["repo"], reply_to["number"], reply)
        except TransientGitHubError as error:  # the write spacing's deferral too: the reply comes later
            return _reschedule(ctx, queues.REPLY_TO_RETRAIN, {"reply_to": reply_to, "result": result}, error)
    return reply


def redeliver_failed(*, max_asks: int = redelivery.MAX_ASKS) -> str:
    """Cron: ask GitHub to redeliver the failed deliveries of its three-day window we never processed."""
    ctx = context.current()
    if ctx.github_app is None:
        return "skipped: dry-run cannot list the App's webhook deliveries"
    result = redelivery.sweep(ctx.github_app, redelivery.Ledger(ctx.redis, ctx.sessionmaker), limit=max_asks)
    for delivery in result.asked:
        log.info("asked GitHub to redeliver %s", delivery.describe())
    for delivery in result.given_up:
        log.warning("gave up on %s: %d redeliveries failed too; `issue-sorter redeliver --again` asks once more",
                    delivery.describe(), redelivery.MAX_REDELIVERIES)
    if result.stopped:
        log.warning("redelivery sweep stopped: %s", result.stopped)
    return result.summary()


def review_prediction(**review) -> str:
    """A click on the review page: write the label as the App, store the decision as the reviewer's."""
    ctx = context.current()
    github = ctx.github(review["installation_id"])
    if not pending.is_turn(ctx.redis, review["prediction_id"], review["review_id"]):
        job = get_current_job()  # an earlier click on the prediction is still queued: this one comes after it
        wait = pending.NotItsTurn(int(job.meta.get("deferrals", 0)) if job else 0)
        return _reschedule(ctx, queues.REVIEW_PREDICTION, review, wait)
    if github is None:
        outcome = "skipped: dry-run cannot write to GitHub"
    else:
        try:
            outcome = review_decide.carry_out(ctx.sessionmaker, github, review_decide.Review(
                **{key: review[key] for key in review_decide.Review.__dataclass_fields__}),
                embedder=_embedder(ctx, review["repo"]))
            decisions_act.refresh_after_decision(ctx.sessionmaker, review["repo"])
        except TransientGitHubError as error:
            outcome = _reschedule(ctx, queues.REVIEW_PREDICTION, review, error)
            if not outcome.startswith("failed"):
                return outcome  # the page keeps saying "queued" until the retry
        except PermanentGitHubError as error:
            outcome = f"failed: GitHub answered {error.status} ({error})"
    pending.finish(ctx.redis, review["prediction_id"], outcome,
                   subject=pending.subject_of(review["choice"], review["label"]), review_id=review["review_id"])
    log.info("review of %s#%s by %s: %s", review["repo"], review["number"], review["reviewer_login"], outcome)
    return outcome


def preview_repository(*, repo: str) -> str:
    """The review page's preview: the serving model against the repository's confirmed labels."""
    ctx = context.current()
    classifier = ctx.models.for_repository(repo)
    if classifier is None:
        return f"skipped: {NO_MODEL}"
    with session_scope(ctx.sessionmaker) as session:
        result = preview.preview(session, classifier, repo)
    preview.REPORTS.store(ctx.redis, result)
    return f"preview of {repo}: {result['issues']} issues, agreement {result['agreement']}"


def _once(spec: queues.JobSpec, event: dict, work: Callable[[WorkerContext, dict], str], *,
          records_itself: bool = False) -> str:
    """`work` once per delivery. With `records_itself`, the work checks and records the delivery in its own
    transaction (_label_issue: two transactions fewer a job, and the record commits with the decision);
    here only what it could not record, a permanent error, is."""
    ctx = context.current()
    started = time.perf_counter()
    job = get_current_job()  # None when a test calls the job directly, with its text in `event`
    try:
        if job is not None and spec.text:
            event = queues.job_text(ctx.redis, spec, job.id, event)
        if not records_itself:
            with session_scope(ctx.sessionmaker) as session:
                if store.is_delivery_processed(session, event["delivery_id"]):
                    return SKIPPED_PROCESSED
        try:
            outcome = work(ctx, event)
            if records_itself:
                return outcome
        except TransientGitHubError as error:
            if not getattr(error, "deferral", False):  # a write spaced by write_spacing never reached GitHub
                metrics.count_github_error(ctx.redis, error.status)
            return _reschedule(ctx, spec, event, error)
        except PermanentGitHubError as error:
            metrics.count_github_error(ctx.redis, error.status)
            outcome = f"dropped: GitHub answered {error.status} ({error})"
            log.warning("%s#%s (delivery %s) %s", event.get("repo"), event.get("number"), event["delivery_id"],
                        outcome)
        with session_scope(ctx.sessionmaker) as session:
            _record_delivery(session, spec, event, outcome)
        return outcome
    finally:
        if job is not None and spec.text:
            queues.forget_text(ctx.redis, job.id)  # done, failed or rescheduled: the text leaves Redis
        metrics.observe_job(ctx.redis, spec.short_name, time.perf_counter() - started)


def _record_delivery(session, spec: queues.JobSpec, event: dict, outcome: str) -> None:
    store.mark_delivery_processed(session, event["delivery_id"], spec.short_name, event.get("action"),
                                  outcome[:OUTCOME_CHARS])


def _reschedule(ctx: WorkerContext, spec: queues.JobSpec, kwargs: dict, error: TransientGitHubError) -> str:
    return queueing.reschedule(ctx.redis, spec, kwargs, delay=error.retry_after, base_seconds=ctx.retry_base_seconds,
                               max_attempts=ctx.max_attempts, why=error)


def _label_issue(ctx: WorkerContext, event: dict) -> str:
    """Gather every input once, decide (pure), carry the plan out: bot.labeling.gather, .decide, .act.
    One transaction from the delivery's check to its record, committed with the decision's outcome."""
    with session_scope(ctx.sessionmaker) as session:
        if store.is_delivery_processed(session, event["delivery_id"]):
            return SKIPPED_PROCESSED
        outcome = _label_in(session, ctx, event)
        _record_delivery(session, queues.LABEL_ISSUE, event, outcome)
    return outcome


def _label_in(session, ctx: WorkerContext, event: dict) -> str:
    github = _cached(ctx, event.get("installation_id"))
    gathered = labeling_gather.gather(session, event, labeling_gather.Sources(
        ctx.settings, github, lambda repo: ctx.models.for_repository(repo, session),  # in this job's
        inference=ctx.inference_slots.held))  # transaction: no session of its own for the promotion's query
    if isinstance(gathered, str):
        return f"skipped: {gathered}"
    result = labeling_act.carry_out(
        session, gathered, labeling_decide.decide(gathered.inputs), github, delivery_id=event["delivery_id"],
        claim=lambda key: bool(ctx.redis.set(key, 1, nx=True, ex=comments.CONFIG_WARNING_SECONDS)),
        checkpoint=session.commit)  # the decision outlives a crash
    return f"skipped: {result}" if isinstance(result, str) else result.outcome


def _forget_labels(ctx: WorkerContext, event: dict) -> str:
    forget_labels(ctx.redis, event["repo"])
    return f"labels of {event['repo']} will be listed again ({event.get('action')} {event.get('label')!r})"


def _record_issue_event(ctx: WorkerContext, event: dict) -> str:
    """Gather the event's inputs once (the sender's standing asked of GitHub only where it matters), decide
    (pure), record: bot.decisions.gather, .decide, .act; then what follows a decision."""
    sources = decisions_gather.Sources(ctx.settings.bot_login, ctx.settings.app_id,
                                       _cached(ctx, event.get("installation_id")))
    embedder = _embedder(ctx, event["repo"])
    with session_scope(ctx.sessionmaker) as session:
        gathered = decisions_gather.gather_event(session, event, sources)
        if isinstance(gathered, str):
            return gathered
        recorded = decisions_act.record(session, gathered, decisions_decide.decide_event(gathered.inputs),
                                        embedder=embedder)
    return _after_decision(ctx, recorded)


def _after_decision(ctx: WorkerContext, recorded: decisions_act.Recorded) -> str:
    """The repository's thresholds follow a decision that changed what is confirmed; an abstain label a
    maintainer's decision made stale is taken off by a job of its own (its write may wait for its slot)."""
    if recorded.changed:
        decisions_act.refresh_after_decision(ctx.sessionmaker, recorded.repo)
    if recorded.take_off:
        queues.enqueue(ctx.redis, queues.TAKE_OFF_ABSTAIN_MARK, {
            "installation_id": recorded.installation_id, "repo": recorded.repo, "number": recorded.number,
            "label": recorded.take_off, "prediction_id": recorded.prediction_id}, retry=queues.CRASH_RETRY)
    return recorded.outcome


def take_off_abstain_mark(*, installation_id: int, repo: str, number: int, label: str, prediction_id: int) -> str:
    """A maintainer decided the issue's kind: the abstain label the bot put on comes off, once."""
    ctx = context.current()
    github = ctx.github(installation_id)
    args = {"installation_id": installation_id, "repo": repo, "number": number, "label": label,
            "prediction_id": prediction_id}
    if github is None:
        return "skipped: dry-run cannot write to GitHub"
    try:
        github.remove_label(repo, number, label)
    except TransientGitHubError as error:  # the write spacing's deferral too: the mark comes off later
        return _reschedule(ctx, queues.TAKE_OFF_ABSTAIN_MARK, args, error)
    except PermanentGitHubError as error:
        if error.status != 404:  # 404: it is off already
            raise
    with session_scope(ctx.sessionmaker) as session:
        decisions_act.mark_taken_off(session, prediction_id, label)
    log.info("%s#%s: took %r off: a maintainer decided its kind", repo, number, label)
    return f"took {label!r} off {repo}#{number}"


def _cached(ctx: WorkerContext, installation_id: int | None) -> CachedGitHub | None:
    """The installation's GitHub with the answers a job need not ask again kept in Redis (bot.github_api.cache)."""
    github = ctx.github(installation_id)
    if github is None:
        return None
    settings = ctx.settings
    return CachedGitHub(github, ctx.redis, labels_seconds=settings.labels_cache_seconds,
                        missing_file_seconds=settings.missing_config_cache_seconds,
                        permission_seconds=settings.permission_cache_seconds)


def _embedder(ctx: WorkerContext, repo: str):
    """The model that embeds confirmed issues into the repository's memory; None when the memory is off or
    the serving model cannot be loaded: a decision is recorded all the same, the memory catches up later."""
    if not ctx.settings.memory:
        return None
    try:
        return ctx.models.for_repository(repo)
    except (OSError, ValueError) as error:  # a missing or unreadable model directory
        log.warning("memory of %s not updated: the serving model cannot be loaded (%s)", repo, error)
        return None


def _handle_comment(ctx: WorkerContext, event: dict) -> str:
    if not commands.is_command(event["body"], commenter_is_bot=event.get("commenter_is_bot", False)):
        return "ignored: not a command"
    github = _cached(ctx, event.get("installation_id"))
    if github is None:
        return "ignored: dry-run cannot check permissions"
    return commands.handle_retrain_command(event, github, ctx.redis)


# ---- the memory's fill -----------------------------------------------------------------------------------

def fill_memory(*, repo: str, version: str) -> str:
    """Embed a repository's confirmed issues into its memory by the model serving it (bot.decisions.memory_fill)."""
    ctx = context.current()
    if not ctx.settings.memory:
        return "skipped: the memory is off"
    embedder = ctx.models.for_repository(repo)  # before mark_started: serving it first here queues no twin
    memory_fill.mark_started(ctx.redis, repo, version, limit=ctx.settings.max_queued_memory_fills)
    if embedder is None:
        return f"skipped: {NO_MODEL}"
    outcome = memory_fill.fill_repository(ctx.sessionmaker, repo, embedder)
    decisions_act.refresh_after_decision(ctx.sessionmaker, repo)
    return outcome

