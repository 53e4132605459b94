"""A reviewer's click, carried out by the feedback worker: the App writes the label, the reviewer decides.

The label changes are made on GitHub as the App's installation, then stored as the label events they are
(bot.decisions.feedback.record_label_event), attributed to the reviewer, so a review and the same edit made on
GitHub by hand leave the same decision behind. The web process never imports this module.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy.orm import Session, sessionmaker

from bot.decisions.feedback import Actor, is_known_label, record_label_event, record_review_verdict
from bot.review.decisions import CHOICES, OWN_CHOICES
from core import memory, own_labels, store
from core.db import session_scope
from core.tables import IssueRecord, Prediction, utcnow


@dataclasses.dataclass(frozen=True)
class Review:
    review_id: str  # names the label events this review stores, so a retried job stores them once
    prediction_id: int
    repo: str
    number: int
    choice: str  # one of CHOICES
    label: str | None  # the label picked, for "relabel"
    reviewer_login: str


def label_changes(ours: str | None, choice: str, picked: str | None,
                  current: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(labels to add, labels to remove) on the issue for a review of the bot's label `ours`."""
    if choice == "accept":
        return ([ours] if ours and ours not in current else []), []
    if choice == "relabel":
        removed = [ours] if ours in current and ours != picked else []
        return ([picked] if picked not in current else []), removed
    return [], ([ours] if ours in current else [])


def refusal(prediction: Prediction | None, issue: IssueRecord | None, review: Review) -> str | None:
    """Why this review cannot be carried out, or None."""
    if prediction is None or issue is None or issue.repository.full_name != review.repo \
            or issue.number != review.number:
        return "refused: no such prediction on this issue"
    if review.choice in OWN_CHOICES:
        if not any(own.label == review.label and own.decision is None for own in prediction.own_labels):
            return f"refused: {review.label!r} is no undecided own label of this prediction"
        return None
    if prediction.decision is not None or issue.confirmed_label is not None:
        return f"refused: already decided ({prediction.decision or f'labelled {issue.confirmed_label!r}'})"
    if review.choice not in CHOICES:
        return f"refused: unknown choice {review.choice!r}"
    if review.choice == "accept" and not prediction.label:
        return "refused: the bot chose no label to accept"
    if review.choice == "relabel" and not review.label:
        return "refused: no label picked"
    return None


def carry_out(sessions: sessionmaker[Session], github, review: Review, *, embedder=None) -> str:
    """Write the review's label changes on GitHub, then store them as the reviewer's label events; the
    issue's memory row follows what is confirmed of it then (`embedder`: the serving model, or None)."""
    with session_scope(sessions) as session:
        prediction = session.get(Prediction, review.prediction_id)
        issue = prediction.issue if prediction else None
        refused = refusal(prediction, issue, review)
        if refused:
            return refused
        ours = prediction.label
        classes = list(getattr(store.serving_model_for(session, review.repo), "labels", None) or [])
    if review.choice in OWN_CHOICES:
        outcome = _own_label(sessions, github, review, classes)
    else:
        outcome = _kind(sessions, github, review, classes, ours)
    with session_scope(sessions) as session:
        memory.follow_confirmation(session, session.get(Prediction, review.prediction_id).issue, embedder)
    return outcome


def _kind(sessions, github, review: Review, classes: list[str], ours: str | None) -> str:
    """The bot's kind `ours` accepted, replaced by the label picked, or rejected."""
    if review.choice == "relabel" and not (review.label in github.list_labels(review.repo)
                                           and is_known_label(review.label, classes)):
        return f"refused: {review.label!r} is not a label of {review.repo} that the bot knows"
    current = github.get_issue(review.repo, review.number).labels
    added, removed = label_changes(ours, review.choice, review.label, current)
    for label in removed:
        github.remove_label(review.repo, review.number, label)
    if added:
        github.add_labels(review.repo, review.number, added)
    return _record(sessions, review, classes, current, added, removed)


def _own_label(sessions, github, review: Review, classes: list[str]) -> str:
    """One own label accepted (put on, if it is a suggestion) or rejected (taken off, if the bot put it on),
    stored as the reviewer's label event; a click that changes no label is the verdict itself."""
    current = github.get_issue(review.repo, review.number).labels
    accept = review.choice == "own-accept"
    if accept and review.label not in current:
        github.add_labels(review.repo, review.number, [review.label])
        return _record(sessions, review, classes, current, [review.label], [])
    if not accept and review.label in current:
        github.remove_label(review.repo, review.number, review.label)
        return _record(sessions, review, classes, current, [], [review.label])
    with session_scope(sessions) as session:
        prediction = session.get(Prediction, review.prediction_id)
        own = next(own for own in prediction.own_labels if own.label == review.label and own.decision is None)
        own.decision, own.decided_at = ("accepted" if accept else "rejected"), utcnow()
        if accept:
            own_labels.confirm(session, prediction.issue, review.label, review.reviewer_login)
    return f"own label {review.label!r}: {own.decision} by {review.reviewer_login}"


def _record(sessions, review: Review, classes: list[str], current: tuple[str, ...], added: list[str],
            removed: list[str]) -> str:
    actor = Actor(review.reviewer_login, is_human=True, is_this_app=False)
    labels, concluded = list(current), []
    with session_scope(sessions) as session:
        prediction = session.get(Prediction, review.prediction_id)
        changes = [("unlabeled", label) for label in removed] + [("labeled", label) for label in added]
        for n, (action, label) in enumerate(changes):
            labels = [x for x in labels if x != label] + ([label] if action == "labeled" else [])
            concluded.append(record_label_event(
                session, prediction.issue, action=action, label=label, actor=actor,
                delivery_id=f"review:{review.review_id}:{n}", current_labels=tuple(labels), classes=classes))
        if not changes:
            concluded.append(record_review_verdict(session, prediction.issue, prediction,
                                                   kept=review.choice == "accept", actor=actor,
                                                   delivery_id=f"review:{review.review_id}:0"))
    return concluded[-1]
