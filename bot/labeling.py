"""The domain core: should this issue be labelled, with which of the repository's labels, and record it.

Everything here takes plain data and objects passed in (a GitHub writer, a classifier, a session);
bot.jobs wires them up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session

from bot import store
from bot.classifier import Classifier, format_issue_text
from bot.kinds import kind_of_label, labels_for_kinds
from bot.models import ModelVersion, Prediction

log = logging.getLogger(__name__)

KIND_COLORS = {"bug": "d73a4a", "feature": "a2eeef", "question": "d876e3", "docs": "0075ca"}


class IssueView(Protocol):
    """What labelling needs to know of an issue; GitHub's fresh copy or the delivery's snapshot."""

    title: str
    body: str
    state: str
    labels: tuple[str, ...]
    is_pull_request: bool
    author_login: str | None


@dataclass(frozen=True)
class LabelingPolicy:
    threshold: float = 0.5  # below this top probability the bot abstains
    create_labels: bool = False  # create the kind's label when the repository has none
    dry_run: bool = False  # classify and store, write nothing to GitHub


@dataclass(frozen=True)
class Choice:
    predicted: str  # the model's top class
    score: float
    label: str | None  # the repository label to apply, None to abstain
    reason: str
    create: bool = False  # the label must be created first


def skip_reason(issue: IssueView, classes: list[str]) -> str | None:
    """Why this issue must not be labelled, or None."""
    if issue.is_pull_request:
        return "it is a pull request"
    if issue.state != "open":
        return f"it is {issue.state}"
    for label in issue.labels:
        if label in classes or kind_of_label(label) in classes:
            return f"it already carries {label!r}"
    return None


def choose_label(scores: dict[str, float], repo_labels: list[str], policy: LabelingPolicy) -> Choice:
    predicted, score = max(scores.items(), key=lambda item: item[1])
    if score < policy.threshold:
        return Choice(predicted, score, None, f"top score {score:.2f} ({predicted}) is below {policy.threshold:.2f}")
    if predicted in repo_labels:  # a repository-specific model predicts the repo's own labels
        return Choice(predicted, score, predicted, "the repository has this label")
    mapped = labels_for_kinds(repo_labels).get(predicted)
    if mapped:
        return Choice(predicted, score, mapped, f"{predicted!r} is {mapped!r} in this repository")
    if policy.create_labels:
        return Choice(predicted, score, predicted, "label created: the repository had none for this kind", True)
    return Choice(predicted, score, None, f"the repository has no label for {predicted!r}")


def classify_and_label(session: Session, *, repo: str, number: int, issue: IssueView, github,
                       classifier: Classifier, policy: LabelingPolicy, delivery_id: str | None = None,
                       installation_id: int | None = None) -> Prediction | str:
    """Label one issue; returns the stored Prediction, or the reason it was skipped."""
    repository = store.ensure_repository(session, repo, installation_id)
    record = store.upsert_issue(session, repository, number, title=issue.title, body=issue.body,
                                author_login=issue.author_login, state=issue.state)
    reason = skip_reason(issue, classifier.labels)
    if reason is None and store.latest_prediction(session, record) is not None:
        reason = "it was already handled"
    if reason:
        log.info("skipping %s#%s: %s", repo, number, reason)
        return reason
    scores = classifier.predict([format_issue_text(issue.title, issue.body)])[0]
    # dry-run cannot read the repository's labels: report the kind names it would map to
    repo_labels = github.list_labels(repo) if github else list(classifier.labels)
    choice = choose_label(scores, repo_labels, policy)
    outcome = _apply(choice, github, repo, number, policy)
    version = session.query(ModelVersion).filter_by(version=classifier.version).one_or_none()
    prediction = Prediction(issue_id=record.id, model_version_id=version.id if version else None,
                            delivery_id=delivery_id, scores=scores, predicted=choice.predicted,
                            label=choice.label, applied=outcome == "applied", outcome=outcome,
                            reason=choice.reason)
    session.add(prediction)
    session.flush()
    log.info("%s#%s: %s %r (%s)", repo, number, outcome, choice.label, choice.reason)
    return prediction


def _apply(choice: Choice, github, repo: str, number: int, policy: LabelingPolicy) -> str:
    if choice.label is None:
        return "abstained"
    if policy.dry_run or github is None:
        return "dry_run"
    if choice.create:
        github.create_label(repo, choice.label, KIND_COLORS.get(choice.predicted, "ededed"),
                            f"Issues of kind {choice.predicted}, as sorted by Issue Sorter")
    github.add_labels(repo, number, [choice.label])
    return "applied"
