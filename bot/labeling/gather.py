"""Gather: every input of one labelling decision, read once (bot.labeling.decide decides, bot.labeling.act acts).

The issue (the delivery's copy while it is fresh, else GitHub's), the repository's config file, the
serving model and its scores, the repository's memory, its labels or issue types, and what was stored
about the issue before. Reading stops as soon as the issue is to be left alone, so a closed issue or a
pull request costs no model. A labelling job only reads the memory: history is embedded by the feedback
queue's jobs, never here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from bot.github_api.issues import IssueSnapshot, event_time, has_text
from bot.intake.events import MAX_JOB_BODY_CHARS
from bot.labeling import comments
from bot.labeling.config import RepoConfig, load_config
from bot.labeling.decide import PENDING, LabelingInputs, PendingDecision, policy_for, skip_reason
from bot.labeling.serving import NO_MODEL
from bot.lifecycle import repositories
from core import memory, own_labels, store
from core.classifier import Classifier
from core.issue_text import format_issue_text
from core.repository_thresholds import repository_thresholds
from core.settings import Settings
from core.tables import Installation, IssueRecord, ModelVersion

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sources:
    """Where the inputs are read: the job builds it from its WorkerContext, tests from tests/fakes.py."""

    settings: Settings
    github: object | None  # the installation's IssueWriter (bot.github_api.cache in a worker); None in dry-run
    model_for: Callable[[str], Classifier | None]  # the model serving a repository (bot.labeling.serving)
    inference: Callable[[], AbstractContextManager] = contextlib.nullcontext  # held around the model's pass


@dataclass(frozen=True)
class Gathered:
    """The decision's inputs, and the rows the writes step records the decision on."""

    inputs: LabelingInputs
    issue_row: IssueRecord
    model_version_id: int | None  # the serving model's registry row, when it has one


def gather(session: Session, event: Mapping, sources: Sources, *, now: dt.datetime | None = None) -> Gathered | str:
    """The inputs for labelling the issue of an `issues.opened` job, or why there is nothing to decide."""
    repo, number, github, settings = event["repo"], event["number"], sources.github, sources.settings
    # held in a name: the session keeps a row only while something refers to it, and ensure_repository
    # below reads the same one (one SELECT, not two)
    installation = session.get(Installation, event["installation_id"]) if event.get("installation_id") else None
    if repositories.is_suspended(installation):
        return "the installation is suspended"
    # the delivery's copy of the issue while it may stand for GitHub's (fresh, not cut for the queue)
    issue = IssueSnapshot.from_job(event["snapshot"]) if has_text(event["snapshot"]) else None
    if github is not None and (issue is None or not issue.is_current(
            now or dt.datetime.now(dt.UTC), max_body_chars=MAX_JOB_BODY_CHARS,
            max_age_seconds=settings.fresh_delivery_seconds)):
        issue = github.get_issue(repo, number)
    if issue is None:
        return "the issue's text expired from the queue, and dry-run cannot read GitHub"
    event_at = event_time(issue, event.get("received_at"))
    classifier = sources.model_for(repo)
    if classifier is None:
        raise RuntimeError(NO_MODEL)
    config, report = _config(github, repo)
    repository = store.ensure_repository(session, repo, event.get("installation_id"), github_id=event.get("repo_id"),
                                         private=event.get("repo_private"))
    row, new = store.upsert_issue(session, repository, number, title=issue.title, body=issue.body,
                                  author_login=issue.author_login, state=issue.state,
                                  opened_at=issue.created_at, event_at=event_at)
    # a row this job created has no prediction and no label event yet: two statements fewer per new issue
    latest = None if new else store.latest_prediction(session, row)
    removed = frozenset() if new else frozenset(store.removed_by_human(session, row))
    version_id = session.query(ModelVersion.id).filter_by(version=classifier.version).scalar()
    policy = policy_for(settings, config, dry_run=github is None, never_again=removed)
    base = LabelingInputs(repo=repo, number=number, issue=issue, policy=policy, classes=list(classifier.labels),
                          config_report=report)
    if latest is not None and latest.outcome == PENDING:  # a crashed job's decision: finish it, decide nothing
        pending = PendingDecision(latest.predicted, latest.label, latest.reason, dict(latest.scores),
                                  own=tuple(own.label for own in latest.own_labels if own.outcome == "applied"))
        return Gathered(replace(base, pending=pending, repo_labels=_labels_for_mark(github, base, pending)),
                        row, latest.model_version_id)
    skip = "it was deleted" if row.state == "deleted" else skip_reason(issue, base.classes, policy)
    if skip is None and latest is not None:
        skip = "it was already handled"
    if skip:
        return Gathered(replace(base, skip=skip), row, version_id)
    if config.target_precision is not None:  # the kinds' thresholds for it, as the feedback queue last stored them
        card = getattr(classifier, "card", None)
        thresholds, _ = repository_thresholds(session, repository.id, classifier.version, classifier.labels,
                                              config.target_precision, card.thresholds if card else None,
                                              default_threshold=policy.threshold, stale_ok=True)
        policy = replace(policy, per_label_thresholds=thresholds)
        base = replace(base, policy=policy)
    # the model's scores, and this repository's memory (this one's only) with the issue's embedding
    text, recalled, vector, own, rules = format_issue_text(issue.title, issue.body), None, None, None, None
    if policy.memory and hasattr(classifier, "predict_and_embed"):  # TF-IDF alone embeds nothing
        with sources.inference():
            (scores,), (vector,) = classifier.predict_and_embed([text])
        rows = memory.read_rows(session, row.repository_id, classifier.version, exclude_issue=row.id)  # once
        recalled = rows.to_memory(classifier.labels) or None
        if policy.areas != ():  # the same rows, with the own labels each carries, and the rules fitted on them
            own = own_labels.memory_of(session, rows, row.repository_id, exclude_issue=row.id)
            rules = own_labels.stored_rules(session, row.repository_id, classifier.version,
                                            target=policy.own_target, min_examples=policy.min_examples,
                                            memory=lambda: own)
    else:
        with sources.inference():
            (scores,) = classifier.predict([text])
    # what the kind maps to: the repository's labels, or its issue types with `apply: type`; dry-run
    # cannot read either, so it reports the kind names it would map to
    if github is None:
        names, types = list(classifier.labels), []
    else:
        names = github.list_issue_types(repo) if policy.apply == "type" else github.list_labels(repo)
        types = github.list_issue_types(repo) if policy.apply == "both" and not policy.held else []
    return Gathered(replace(base, scores=scores, memory=recalled, vector=vector, repo_labels=names,
                            issue_types=types, own_memory=own, own_rules=rules), row, version_id)


def _labels_for_mark(github, base: LabelingInputs, pending: PendingDecision) -> list[str]:
    """A resumed abstention still owes its abstain label: the repository's labels (cached) say whether it must
    be created first. Any other resumed decision reads nothing more."""
    policy = base.policy
    if github is None or pending.label is not None or not policy.abstain_label or policy.apply == "type" \
            or policy.abstain_label in base.issue.labels:
        return []
    return github.list_labels(base.repo)


def _config(github, repo: str) -> tuple[RepoConfig, str | None]:
    """The repository's config and the report of its problems (bot.labeling.comments); a file that is broken or
    cannot be read holds the repository (the report says why and how to fix it), and never stops a job."""
    config, problems = load_config(github.get_file if github is not None else None, repo)
    if not problems:
        return config, None
    report = comments.problem_report(config.source, problems, held=bool(config.held))
    log.warning("%s", report)
    return config, report
