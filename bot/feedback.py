"""Maintainers' label decisions → label events, decisions on our predictions, and training data.

- a suggestion a human kept (the issue closed, or other labels changed, with ours still on) is *accepted*;
- one a human removed is *rejected*, or *corrected* when a human put another label we know on the issue;
- a label we know that a human put on an issue where we abstained (or never ran) is new training data.
Events of the App itself, and of any bot, are recorded but never count as a human's decision.
A confirmed label enters the repository's memory at once (core.memory), embedded by the serving model;
a label taken back leaves it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.issues import IssueSnapshot
from core import memory, store
from core.issue_text import format_issue_text
from core.kinds import kind_of_label
from core.tables import IssueRecord, LabelEvent, Prediction, utcnow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    login: str | None
    is_human: bool
    is_this_app: bool


def identify_actor(sender_login: str | None, sender_is_bot: bool, via_app_id: int | None, *,
                   bot_login: str | None, app_id: int | None) -> Actor:
    this_app = bool((bot_login and sender_login == bot_login) or (app_id and via_app_id == app_id))
    return Actor(sender_login, is_human=not (sender_is_bot or this_app), is_this_app=this_app)


def is_known_label(label: str, classes: list[str]) -> bool:
    """A label the models can learn from: one of a model's classes, or one that maps to a kind."""
    return label in classes or kind_of_label(label) is not None


def record_issue_event(session: Session, event: dict, *, bot_login: str | None, app_id: int | None,
                       embedder=None) -> str:
    """An `issues` delivery other than opened: store what it says of the issue, and the decision it implies.

    A deleted issue keeps nothing of its text and no training label; a transferred one is marked so
    here (it is labelled afresh where it went, as a new delivery). `embedder`, the model serving the
    repository (None: no memory), embeds a newly confirmed issue into the repository's memory.
    """
    if is_event_recorded(session, event["delivery_id"]):  # a worker died before marking it done
        return "skipped: event already recorded"
    snapshot = IssueSnapshot.from_job(event["snapshot"])
    actor = identify_actor(event.get("sender_login"), event.get("sender_is_bot", False), event.get("via_app_id"),
                           bot_login=bot_login, app_id=app_id)
    repository = store.ensure_repository(session, event["repo"], event.get("installation_id"))
    deleted = event["action"] == "deleted"
    state = {"deleted": "deleted", "transferred": "transferred"}.get(event["action"], snapshot.state)
    issue = store.upsert_issue(session, repository, event["number"], title="" if deleted else snapshot.title,
                               body="" if deleted else snapshot.body, author_login=snapshot.author_login,
                               state=state)
    confirmed = issue.confirmed_label
    if deleted:
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
    serving = store.serving_model_for(session, event["repo"])
    outcome = record_label_event(session, issue, action=event["action"], label=event.get("label"), actor=actor,
                                 delivery_id=event["delivery_id"], current_labels=snapshot.labels,
                                 classes=list(serving.labels) if serving else [])
    if issue.confirmed_label != confirmed:
        update_memory(session, issue, embedder)
    return outcome


def update_memory(session: Session, issue: IssueRecord, embedder) -> None:
    """The issue's entry in its repository's memory follows its confirmed label: replaced, or dropped."""
    memory.forget(session, issue)
    if issue.confirmed_label is None or embedder is None or not hasattr(embedder, "embed"):
        return
    vector = embedder.embed([format_issue_text(issue.title, issue.body)])[0]
    memory.remember(session, issue, issue.confirmed_label, embedder.version, vector)


def record_label_event(session: Session, issue: IssueRecord, *, action: str, label: str | None, actor: Actor,
                       delivery_id: str | None, current_labels: tuple[str, ...], classes: list[str]) -> str:
    """Store the event and update the decision it implies; returns what was concluded."""
    session.add(LabelEvent(issue_id=issue.id, delivery_id=delivery_id, action=action, label=label,
                           actor_login=actor.login, actor_is_human=actor.is_human, by_this_app=actor.is_this_app))
    if not actor.is_human:
        return "bot event: recorded, not a decision"
    prediction = store.latest_prediction(session, issue)
    if action == "labeled" and label:
        return _human_added(session, issue, prediction, label, actor, current_labels, classes)
    if action == "unlabeled" and label:
        return _human_removed(session, issue, prediction, label, actor, current_labels, classes)
    if action == "closed" and prediction is not None and prediction.applied:
        if prediction.decision is None and prediction.label in current_labels:
            return _decide(issue, prediction, "accepted", prediction.label, actor)
    return "recorded"


def _human_added(session, issue, prediction, label, actor, current_labels, classes) -> str:
    if not is_known_label(label, classes):
        return _keep_if_reviewed(issue, prediction, actor, current_labels)
    if prediction is None or not prediction.applied:
        _confirm(issue, label, actor)
        return "new training data: a human labelled an issue the bot did not label"
    if label == prediction.label:
        return _decide(issue, prediction, "accepted", label, actor)
    if prediction.label not in current_labels:  # ours was removed before: this is the correction
        return _decide(issue, prediction, "corrected", label, actor)
    return "recorded: another known label beside ours; waiting for the maintainer to remove one"


def _human_removed(session, issue, prediction, label, actor, current_labels, classes) -> str:
    if issue.confirmed_label == label:  # a confirmed label taken back is no longer training data
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
    if prediction is None or not prediction.applied or label != prediction.label:
        return _keep_if_reviewed(issue, prediction, actor, current_labels)
    replacement = _human_known_label_since(session, issue, prediction, current_labels, classes)
    if replacement:
        return _decide(issue, prediction, "corrected", replacement, actor)
    prediction.decision, prediction.decided_at = "rejected", utcnow()
    return "rejected: a maintainer removed our label"


def _keep_if_reviewed(issue, prediction, actor, current_labels) -> str:
    # A maintainer who edits labels and leaves ours on has reviewed it.
    if prediction is not None and prediction.applied and prediction.decision is None \
            and prediction.label in current_labels:
        return _decide(issue, prediction, "accepted", prediction.label, actor)
    return "recorded"


def _human_known_label_since(session, issue, prediction, current_labels, classes) -> str | None:
    added = session.scalars(select(LabelEvent.label).where(
        LabelEvent.issue_id == issue.id, LabelEvent.action == "labeled", LabelEvent.actor_is_human.is_(True),
        LabelEvent.occurred_at >= prediction.created_at).order_by(LabelEvent.id.desc())).all()
    for label in added:
        if label in current_labels and label != prediction.label and is_known_label(label, classes):
            return label
    return None


def _decide(issue: IssueRecord, prediction: Prediction, decision: str, label: str, actor: Actor) -> str:
    prediction.decision, prediction.decided_at = decision, utcnow()
    _confirm(issue, label, actor)
    return f"{decision}: {label!r}"


def _confirm(issue: IssueRecord, label: str, actor: Actor) -> None:
    issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = label, utcnow(), actor.login


def is_event_recorded(session: Session, delivery_id: str | None) -> bool:
    """True when this delivery's label event is already stored (its job ran before, up to the commit)."""
    return delivery_id is not None and session.scalar(
        select(LabelEvent.id).where(LabelEvent.delivery_id == delivery_id)) is not None


def removed_by_human(session: Session, issue: IssueRecord) -> set[str]:
    """Labels a human took off this issue: the bot never puts them back."""
    return set(session.scalars(select(LabelEvent.label).where(
        LabelEvent.issue_id == issue.id, LabelEvent.action == "unlabeled", LabelEvent.actor_is_human.is_(True))))
