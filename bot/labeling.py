"""The domain core: should this issue be labelled, with which of the repository's labels, and record it.

Everything here takes plain data and objects passed in (a GitHub writer, a classifier, a session);
bot.jobs wires them up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import Session

from bot.feedback import removed_by_human
from bot.github_client import GitHubError
from bot.issues import IssueSnapshot, event_time
from bot.markdown import code_span
from bot.repo_config import DEFAULT_COMMENT, SUGGEST_COMMENT, RepoConfig
from core import memory, store
from core.classifier import Classifier
from core.issue_text import format_issue_text
from core.kinds import kind_of_label, labels_for_kinds
from core.settings import Settings
from core.tables import IssueRecord, ModelVersion, Prediction

log = logging.getLogger(__name__)

KIND_COLORS = {"bug": "d73a4a", "feature": "a2eeef", "question": "d876e3", "docs": "0075ca"}


@dataclass(frozen=True)
class LabelingPolicy:
    """Everything that decides what the bot does with scores, from Settings and the repo's config."""

    threshold: float = 0.5  # below this top probability the bot abstains
    create_labels: bool = False  # create the kind's label when the repository has none
    dry_run: bool = False  # classify and store, write nothing to GitHub
    mode: str = "label"  # label | comment | suggest | shadow | off (see bot.repo_config)
    apply: str = "label"  # label | type (the organisation's issue type) | both
    label_names: dict[str, str] = field(default_factory=dict)  # kind → label, from the repo's config
    allow: tuple[str, ...] = ()  # when set, only these labels are applied
    per_label_thresholds: dict[str, float] = field(default_factory=dict)  # from a target precision
    comment_template: str | None = None
    skip_authors: tuple[str, ...] = ()
    never_again: frozenset[str] = frozenset()  # labels a human removed from this issue
    held: str | None = None  # the repository's config is broken: apply nothing, say why (RepoConfig.held)
    memory: bool = True  # adjust the model's scores by the repository's confirmed issues (core.memory)
    abstain_label: str | None = None  # put on an issue the bot abstains on, e.g. needs-triage; None: nothing

    def threshold_for(self, predicted: str) -> float:
        return self.per_label_thresholds.get(predicted, self.threshold)


def policy_for(settings: Settings, config: RepoConfig, classifier: Classifier, *, dry_run: bool) -> LabelingPolicy:
    """The policy for one repository: its config over the App's settings, and per-label thresholds from
    the model's evaluation when the config asks for a target precision."""
    thresholds: dict[str, float] = {}
    card = getattr(classifier, "card", None)
    if config.target_precision is not None and card is not None and card.thresholds:
        thresholds = {label: float(t) for label, t in card.thresholds.items()}
    return LabelingPolicy(threshold=config.threshold if config.threshold is not None else settings.threshold,
                          # an organisation's issue types are its own: the bot creates labels, never types
                          create_labels=settings.create_labels and config.apply != "type",
                          dry_run=dry_run, mode=config.mode,
                          apply=config.apply, label_names=config.labels, allow=config.allow, per_label_thresholds=thresholds,
                          comment_template=config.comment_template, skip_authors=config.skip_authors,
                          held=config.held, memory=settings.memory,
                          abstain_label=settings.abstain_label if config.abstain_label is None
                          else config.abstain_label or None)


@dataclass(frozen=True)
class Choice:
    predicted: str  # the model's top class
    score: float
    label: str | None  # the repository label to apply, None to abstain
    reason: str
    create: bool = False  # the label must be created first


def skip_reason(issue: IssueSnapshot, classes: list[str], policy: LabelingPolicy | None = None) -> str | None:
    """Why this issue must not be labelled, or None."""
    if policy is not None and policy.mode == "off":
        return "the repository's config sets mode: off"
    if policy is not None and issue.author_login in policy.skip_authors:
        return f"its author {issue.author_login} is in skip_authors"
    if issue.is_pull_request:
        return "it is a pull request"
    if issue.state != "open":
        return f"it is {issue.state}"
    for label in issue.labels:
        if label in classes or kind_of_label(label) in classes:
            return f"it already carries {label!r}"
    sets_type = policy is not None and policy.apply in ("type", "both")
    if sets_type and issue.issue_type and (issue.issue_type in classes or kind_of_label(issue.issue_type) in classes):
        return f"it already has the type {issue.issue_type!r}"
    return None


def choose_label(scores: dict[str, float], repo_labels: list[str], policy: LabelingPolicy) -> Choice:
    predicted, score = max(scores.items(), key=lambda item: item[1])
    if policy.held:  # fail closed: a broken allow or labels could let through what the maintainer forbade
        return Choice(predicted, score, None, policy.held)
    choice = _map_to_repository(predicted, score, repo_labels, policy)
    threshold = policy.threshold_for(predicted)
    if score < threshold:
        return Choice(predicted, score, None, f"top score {score:.2f} ({predicted}) is below {threshold:.2f}")
    if choice.label and policy.allow and choice.label not in policy.allow:
        return Choice(predicted, score, None, f"{choice.label!r} is not in the repository's allowlist")
    if choice.label and choice.label in policy.never_again:
        return Choice(predicted, score, None, f"a maintainer removed {choice.label!r} from this issue")
    return choice


def _map_to_repository(predicted: str, score: float, repo_labels: list[str], policy: LabelingPolicy) -> Choice:
    configured = policy.label_names.get(predicted)
    if configured and (configured in repo_labels or policy.create_labels):
        return Choice(predicted, score, configured, f"{predicted!r} is {configured!r} by the repository's config",
                      configured not in repo_labels)
    if predicted in repo_labels:  # a repository-specific model predicts the repo's own labels
        return Choice(predicted, score, predicted, "the repository has this label")
    mapped = labels_for_kinds(repo_labels).get(predicted)
    if mapped:
        return Choice(predicted, score, mapped, f"{predicted!r} is {mapped!r} in this repository")
    if policy.create_labels:
        return Choice(predicted, score, predicted, "label created: the repository had none for this kind", True)
    return Choice(predicted, score, None, f"the repository has no label for {predicted!r}")


PENDING = "applying"  # the decision is stored, GitHub not yet written: a crash here is resumed, not redone


def classify_and_label(session: Session, *, repo: str, number: int, issue: IssueSnapshot, github,
                       classifier: Classifier, policy: LabelingPolicy, delivery_id: str | None = None,
                       installation_id: int | None = None, github_id: int | None = None,
                       private: bool | None = None, received_at: str | None = None,
                       checkpoint: Callable[[], None] | None = None) -> Prediction | str:
    """Label one issue; returns the stored Prediction, or the reason it was skipped.

    The Prediction is stored as PENDING and `checkpoint` (the job's commit) called before GitHub is
    written, so a job that dies after GitHub took the label finishes the same decision when retried,
    instead of finding the label and recording nothing."""
    repository = store.ensure_repository(session, repo, installation_id, github_id=github_id, private=private)
    record = store.upsert_issue(session, repository, number, title=issue.title, body=issue.body,
                                author_login=issue.author_login, state=issue.state,
                                opened_at=issue.created_at, event_at=event_time(issue, received_at))
    if record.state == "deleted":
        return "it was deleted"
    latest = store.latest_prediction(session, record)
    if latest is not None and latest.outcome == PENDING:
        return _resume(latest, issue, github, repo, number, policy)
    reason = skip_reason(issue, classifier.labels, policy)
    if reason is None and latest is not None:
        reason = "it was already handled"
    if reason:
        log.info("skipping %s#%s: %s", repo, number, reason)
        return reason
    policy = replace(policy, never_again=frozenset(removed_by_human(session, record)))
    scores = scores_with_memory(session, record, classifier, format_issue_text(issue.title, issue.body),
                                use_memory=policy.memory)
    names = _names_to_choose_from(github, repo, classifier, policy)
    choice = choose_label(scores, names, policy)
    issue_type = _type_beside(choice, github, repo, policy) if policy.apply == "both" else None
    if issue_type:
        choice = replace(choice, reason=f"{choice.reason}; its issue type is {issue_type!r}")
    version = session.query(ModelVersion).filter_by(version=classifier.version).one_or_none()
    prediction = Prediction(issue_id=record.id, model_version_id=version.id if version else None,
                            delivery_id=delivery_id, scores=scores, predicted=choice.predicted,
                            label=choice.label, applied=False, outcome=PENDING, reason=choice.reason)
    session.add(prediction)
    session.flush()
    if checkpoint is not None:
        checkpoint()
    try:
        _record_outcome(prediction, _apply(choice, scores, github, repo, number, policy, issue_type))
        if prediction.outcome == "abstained" and policy.apply != "type":  # the abstention mark is a label
            prediction.reason += mark_abstained(github, repo, number, names, policy)
    except GitHubError:  # GitHub answered and took nothing: forget the decision; the job decides what next
        session.delete(prediction)
        session.flush()
        if checkpoint is not None:
            checkpoint()
        raise
    session.flush()
    log.info("%s#%s: %s %r (%s)", repo, number, prediction.outcome, choice.label, choice.reason)
    return prediction


def _names_to_choose_from(github, repo: str, classifier: Classifier, policy: LabelingPolicy) -> list[str]:
    """The repository's labels, or its issue types with `apply: type`; dry-run cannot read either, so it
    reports the kind names it would map to."""
    if github is None:
        return list(classifier.labels)
    return github.list_issue_types(repo) if policy.apply == "type" else github.list_labels(repo)


def _type_beside(choice: Choice, github, repo: str, policy: LabelingPolicy) -> str | None:
    """With `apply: both`, the issue type that matches the chosen label's kind (by name, as labels are)."""
    if choice.label is None or github is None or policy.held:
        return None
    types = github.list_issue_types(repo)
    return _map_to_repository(choice.predicted, choice.score, types, LabelingPolicy()).label


def scores_with_memory(session: Session, record: IssueRecord, classifier: Classifier, text: str, *,
                       use_memory: bool) -> dict[str, float]:
    """The model's scores, adjusted by this repository's memory (and only this one's) when it has one."""
    if not use_memory or not hasattr(classifier, "predict_and_embed"):  # TF-IDF alone embeds nothing
        return classifier.predict([text])[0]
    refill_memory(session, record.repository_id, classifier)
    scores, vectors = classifier.predict_and_embed([text])
    recalled = memory.recall(session, record.repository_id, classifier.version, classifier.labels,
                             exclude_issue=record.id)
    return memory.adjust_scores(scores[0], recalled.nearest(vectors[0]), recalled.label_counts())


def refill_memory(session: Session, repository_id: int, classifier: Classifier) -> int:
    """Embed up to REFILL_PER_JOB confirmed issues the serving version has not embedded (a new model, a
    backfill); once none is left, drop other versions' rows. Returns how many were embedded."""
    missing = memory.not_embedded(session, repository_id, classifier.version)
    if not missing:
        memory.drop_other_versions(session, repository_id, classifier.version)
        return 0
    vectors = classifier.embed([format_issue_text(issue.title, issue.body) for issue in missing])
    for issue, vector in zip(missing, vectors, strict=True):
        memory.remember(session, issue, issue.confirmed_label, classifier.version, vector)
    log.info("memory of repository %s: %d confirmed issues embedded by %s", repository_id, len(missing),
             classifier.version)
    return len(missing)


def mark_abstained(github, repo: str, number: int, repo_labels: list[str], policy: LabelingPolicy) -> str:
    """Put the configured abstention label on the issue, so nothing is skipped silently; what was done."""
    name = policy.abstain_label
    if not name or policy.dry_run or github is None:
        return ""
    if policy.allow and name not in policy.allow:  # the allowlist names every label the bot may apply
        return f"; {name!r} not applied: it is not in the repository's allowlist"
    if name not in repo_labels:
        github.create_label(repo, name, "ededed", "Issue Sorter was not sure: a maintainer should sort it")
    github.add_labels(repo, number, [name])
    return f"; marked {name!r}"


def _resume(pending: Prediction, issue: IssueSnapshot, github, repo: str, number: int,
            policy: LabelingPolicy) -> Prediction:
    """Finish a decision a crashed job stored: write to GitHub only what GitHub does not have yet."""
    if pending.label is not None and pending.label in issue.labels:
        outcome = "applied"  # GitHub took the label before the crash
    else:
        choice = Choice(pending.predicted, pending.scores.get(pending.predicted, 0.0), pending.label,
                        pending.reason)
        outcome = _apply(choice, pending.scores, github, repo, number, policy)
    _record_outcome(pending, outcome)
    log.info("%s#%s: resumed after a crash: %s %r", repo, number, outcome, pending.label)
    return pending


def _record_outcome(prediction: Prediction, outcome: str) -> None:
    prediction.outcome, prediction.applied = outcome, outcome == "applied"


def _apply(choice: Choice, scores: dict[str, float], github, repo: str, number: int,
           policy: LabelingPolicy, issue_type: str | None = None) -> str:
    if policy.held:
        return "held"
    if policy.mode == "shadow":  # the maintainers judge it first, on the review page, before it writes
        return "shadow"
    if policy.mode == "suggest":
        if not (policy.dry_run or github is None):
            github.create_comment(repo, number, suggestion_comment(scores, policy))
        return "suggested"
    if choice.label is None:
        return "abstained"
    if policy.dry_run or github is None:
        return "dry_run"
    if policy.apply == "type":  # an organisation's types cannot be created here: choose_label never asks
        github.set_issue_type(repo, number, choice.label)
    else:
        if choice.create:
            github.create_label(repo, choice.label, KIND_COLORS.get(choice.predicted, "ededed"),
                                f"Issues of kind {choice.predicted}, as sorted by Issue Sorter")
        github.add_labels(repo, number, [choice.label])
    if issue_type:
        github.set_issue_type(repo, number, issue_type)
    if policy.mode == "comment":
        github.create_comment(repo, number, label_comment(choice, scores, policy))
    return "applied"


def label_comment(choice: Choice, scores: dict[str, float], policy: LabelingPolicy) -> str:
    """The comment of comment mode, after labelling; label names in it are code spans."""
    template = policy.comment_template or DEFAULT_COMMENT
    return template.format(label=code_span(choice.label), score=choice.score,
                           suggestions=_suggestion_lines(scores))


def suggestion_comment(scores: dict[str, float], policy: LabelingPolicy) -> str:
    """The comment of suggest mode; every label name in it is a code span, so none can mention anyone."""
    template = policy.comment_template or SUGGEST_COMMENT
    top, score = max(scores.items(), key=lambda item: item[1])
    return template.format(label=code_span(top), score=score, suggestions=_suggestion_lines(scores))


def _suggestion_lines(scores: dict[str, float], n: int = 3) -> str:
    ranked = sorted(scores.items(), key=lambda item: -item[1])[:n]
    return "\n".join(f"- {code_span(label)}: {score:.0%}" for label, score in ranked)
