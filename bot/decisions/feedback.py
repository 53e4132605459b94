"""Maintainers' label decisions → label events, decisions on our predictions, and training data.

- a suggestion a human kept (the issue closed, or other labels changed, with ours still on) is *accepted*;
- one a human removed is *rejected*, or *corrected* when a human put another label we know on the issue;
- a label we know that a human put on an issue where we abstained (or never ran) is new training data;
- a suggestion (suggest mode, or shadow mode where the bot would have labelled: nothing written) is accepted
  or corrected by the first known label a human adds;
- a review on the review page is stored as the label events it caused, attributed to the reviewer;
- the repository's own labels (core.own_labels) are decided one by one beside the kind: one a human adds is a
  confirmed example (and accepts the bot's suggestion of it), one a human removes is no example any more
  (and rejects the bot's, which is never put back: removed_by_human), one left on at closing is accepted.
Events of the App itself, and of any bot, are recorded but never count as a human's decision.
A confirmed label enters the repository's memory at once (core.memory), embedded by the serving model;
a label taken back leaves it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from bot.github_api.issues import IssueSnapshot, event_time, has_text
from core import memory, own_labels, store
from core.kinds import kind_of_label
from core.tables import (
    IssueRecord,
    LabelEvent,
    MemoryEntry,
    OwnLabelExample,
    Prediction,
    Repository,
    utcnow,
)

log = logging.getLogger(__name__)
# An issue type set or removed (typed / untyped) is a maintainer's decision like a label's.
ADDED, REMOVED = ("labeled", "typed"), ("unlabeled", "untyped")


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

    Events carry their time (bot.github_api.issues.event_time): one older than the newest applied to the issue,
    or any after its deletion, is recorded as history and changes nothing. A deleted issue keeps
    nothing of its text and no training label; a transferred one moves, history and decisions with it.
    `embedder`, the model serving the repository (None: no memory), embeds a newly confirmed issue into
    the repository's memory.
    """
    if is_event_recorded(session, event["delivery_id"]):  # a worker died before marking it done
        return "skipped: event already recorded"
    snapshot = IssueSnapshot.from_job(event["snapshot"])
    known = has_text(event["snapshot"])  # a retry's copy in dry-run has none: the stored text stays
    actor = identify_actor(event.get("sender_login"), event.get("sender_is_bot", False), event.get("via_app_id"),
                           bot_login=bot_login, app_id=app_id)
    repository = store.ensure_repository(session, event["repo"], event.get("installation_id"),
                                         github_id=event.get("repo_id"), private=event.get("repo_private"))
    event_at = event_time(snapshot, event.get("received_at"))
    existing = store.find_issue(session, repository, event["number"])
    if existing is not None and not store.accepts_event(existing, event_at):
        _add_label_event(session, existing, event, actor)
        return f"stale: older than the issue's newest event ({existing.state}); recorded, nothing changed"
    if event["action"] == "transferred" and event.get("moved_to"):
        return transfer_issue(session, repository, event, snapshot, actor, event_at, text_known=known)
    deleted = event["action"] == "deleted"
    state = {"deleted": "deleted", "transferred": "transferred"}.get(event["action"], snapshot.state)
    issue = store.upsert_issue(session, repository, event["number"],
                               title="" if deleted else snapshot.title if known else None,
                               body="" if deleted else snapshot.body if known else None,
                               author_login=snapshot.author_login, state=state, event_at=event_at)
    confirmed = issue.confirmed_label
    if deleted:
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
        session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id))
    serving = store.serving_model_for(session, repository.full_name)
    outcome = record_label_event(session, issue, action=event["action"], label=event.get("label"), actor=actor,
                                 delivery_id=event["delivery_id"], current_labels=snapshot.labels + (
                                     (snapshot.issue_type,) if snapshot.issue_type else ()),
                                 classes=list(serving.labels) if serving else [])
    if issue.confirmed_label != confirmed:
        update_memory(session, issue, embedder)
    return outcome


def update_memory(session: Session, issue: IssueRecord, embedder) -> None:
    """The issue's entry in its repository's memory follows what is confirmed of it, its kind or its own
    labels (core.memory.follow_confirmation): relabelled, embedded where missing, or dropped. Before, a kind
    removed from an issue that keeps own labels dropped its row and embedded it again."""
    memory.follow_confirmation(session, issue, embedder)


def transfer_issue(session: Session, source: Repository, event: dict, snapshot: IssueSnapshot, actor: Actor,
                   event_at, *, text_known: bool = True) -> str:
    """issues.transferred: the issue's row, predictions and decisions move to where it went.

    Only into a repository of the same installation (known to us, or of the same owner): an issue
    moved out of the installation's reach keeps nothing here, as if deleted; either way the old repository's
    memory no longer holds it (core.memory: it would vote on issues there). Without the snapshot's text
    (`text_known` False: a retried job's), the stored text moves with the row.
    """
    moved = event["moved_to"]
    issue = store.upsert_issue(session, source, event["number"], title=snapshot.title if text_known else None,
                               body=snapshot.body if text_known else None, author_login=snapshot.author_login,
                               state="transferred", event_at=event_at)
    _add_label_event(session, issue, event, actor)
    known = store.find_repository(session, github_id=moved.get("repo_id")) if moved.get("repo_id") else None
    same_owner = moved["repo"].split("/")[0].lower() == source.full_name.split("/")[0].lower()
    if not (same_owner or (known is not None and known.installation_id == source.installation_id)):
        issue.title, issue.body = "", ""
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
        session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id))
        memory.forget(session, issue)
        return "transferred out of this installation: its text and label are no longer kept"
    target = store.ensure_repository(session, moved["repo"], source.installation_id,
                                     github_id=moved.get("repo_id"), private=moved.get("private"))
    there = store.find_issue(session, target, moved["number"])
    if there is None:
        issue.repository_id, issue.number, issue.state = target.id, moved["number"], snapshot.state
        # its confirmed label moves too: the old repository's memory forgets it, the new one's holds it
        session.execute(update(MemoryEntry).where(MemoryEntry.issue_id == issue.id)
                        .values(repository_id=target.id).execution_options(synchronize_session=False))
        session.flush()
        return f"transferred: history and decisions moved to {target.full_name}#{moved['number']}"
    _merge_into(session, issue, there)  # the new place's `opened` was handled first
    return f"transferred: history and decisions merged into {target.full_name}#{moved['number']}"


def _merge_into(session: Session, issue: IssueRecord, there: IssueRecord) -> None:
    memory.forget(session, issue)  # its row goes; the new place's memory fill embeds `there` if confirmed
    there_own = select(OwnLabelExample.label).where(OwnLabelExample.issue_id == there.id)
    session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id,
                                                  OwnLabelExample.label.in_(there_own)))
    for table in (Prediction, LabelEvent, OwnLabelExample):
        session.execute(update(table).where(table.issue_id == issue.id).values(issue_id=there.id)
                        .execution_options(synchronize_session=False))
    if there.confirmed_label is None and issue.confirmed_label is not None:
        there.confirmed_label, there.confirmed_at, there.confirmed_by = (
            issue.confirmed_label, issue.confirmed_at, issue.confirmed_by)
    session.delete(issue)
    session.flush()


def _add_label_event(session: Session, issue: IssueRecord, event: dict, actor: Actor) -> None:
    session.add(LabelEvent(issue_id=issue.id, delivery_id=event["delivery_id"], action=event["action"],
                           label=event.get("label"), actor_login=actor.login, actor_is_human=actor.is_human,
                           by_this_app=actor.is_this_app))


def record_label_event(session: Session, issue: IssueRecord, *, action: str, label: str | None, actor: Actor,
                       delivery_id: str | None, current_labels: tuple[str, ...], classes: list[str]) -> str:
    """Store the event and update the decision it implies; returns what was concluded."""
    _add_label_event(session, issue, {"delivery_id": delivery_id, "action": action, "label": label}, actor)
    if not actor.is_human:
        return "bot event: recorded, not a decision"
    prediction = store.latest_prediction(session, issue)
    own = _own_label_event(session, issue, prediction, action, label, actor, current_labels, classes)
    outcome = _kind_decision(session, issue, prediction, action, label, actor, current_labels, classes)
    return f"{outcome}; {own}" if own else outcome


def is_own_label(label: str, classes: list[str]) -> bool:
    """One of the repository's own labels (an area, a component; an area's bugs too): no process label,
    none of the model's classes, and no label that only names a kind (core.own_labels)."""
    return own_labels.is_candidate(label) and label not in classes


def _own_label_event(session, issue, prediction, action, label, actor, current_labels, classes) -> str:
    """What a human's event says of the own labels: examples confirmed or taken back, decisions judged."""
    decisions = prediction.own_labels if prediction is not None else []
    if action == "closed":
        kept = [row for row in decisions if row.outcome == "applied" and row.decision is None
                and row.label in current_labels]
        for row in kept:  # a maintainer who closes the issue with the bot's own label on keeps it
            row.decision, row.decided_at = "accepted", utcnow()
            own_labels.confirm(session, issue, row.label, actor.login)
        return f"own labels kept: {', '.join(repr(row.label) for row in kept)}" if kept else ""
    if not label or not is_own_label(label, classes):
        return ""
    ours = next((row for row in decisions if row.label == label and row.decision is None), None)
    if action in ADDED:
        own_labels.confirm(session, issue, label, actor.login)
        if ours is not None and ours.outcome == "suggested":
            ours.decision, ours.decided_at = "accepted", utcnow()
            return f"own label {label!r}: suggestion accepted"
        return f"own label {label!r}: a confirmed example"
    if action in REMOVED:
        own_labels.unconfirm(session, issue, label)
        if ours is not None and ours.outcome == "applied":
            ours.decision, ours.decided_at = "rejected", utcnow()
            return f"own label {label!r}: rejected, never put back on this issue"
        return f"own label {label!r}: no longer an example"
    return ""


def _kind_decision(session, issue, prediction, action, label, actor, current_labels, classes) -> str:
    if action in ADDED and label:
        return _human_added(session, issue, prediction, label, actor, current_labels, classes)
    if action in REMOVED and label:
        return _human_removed(session, issue, prediction, label, actor, current_labels, classes)
    if action == "closed" and prediction is not None and prediction.applied:
        if prediction.decision is None and prediction.label in current_labels:
            return _decide(issue, prediction, "accepted", prediction.label, actor)
    return "recorded"


def _human_added(session, issue, prediction, label, actor, current_labels, classes) -> str:
    if not is_known_label(label, classes):
        return _keep_if_reviewed(issue, prediction, actor, current_labels)
    if is_unwritten_suggestion(prediction) and prediction.decision is None:
        verdict = "accepted" if label == prediction.label else "corrected"
        return _decide(issue, prediction, verdict, label, actor)
    if prediction is None or not prediction.applied:
        _confirm(issue, label, actor)
        return "new training data: a human labelled an issue the bot did not label"
    if label == prediction.label:
        return _decide(issue, prediction, "accepted", label, actor)
    if prediction.label not in current_labels:  # ours was removed before: this is the correction
        return _decide(issue, prediction, "corrected", label, actor)
    return "recorded: another known label beside ours; waiting for the maintainer to remove one"


def is_unwritten_suggestion(prediction: Prediction | None) -> bool:
    """A label the bot chose and did not write: suggest mode's always, shadow mode's when it would have
    labelled (a shadow abstention stays an abstention). The first known label a human adds judges it."""
    return prediction is not None and (prediction.outcome == "suggested" or (
        prediction.outcome == "shadow" and prediction.label is not None))


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


def record_review_verdict(session: Session, issue: IssueRecord, prediction: Prediction, *, kept: bool,
                          actor: Actor, delivery_id: str) -> str:
    """A review that changed no label: the bot's label is kept as it is, or its suggestion dismissed."""
    session.add(LabelEvent(issue_id=issue.id, delivery_id=delivery_id, action="kept" if kept else "dismissed",
                           label=prediction.label, actor_login=actor.login, actor_is_human=True))
    if kept:
        return _decide(issue, prediction, "accepted", prediction.label, actor)
    prediction.decision, prediction.decided_at = "rejected", utcnow()
    return f"rejected: {actor.login} dismissed the suggestion"


def _keep_if_reviewed(issue, prediction, actor, current_labels) -> str:
    # A maintainer who edits labels and leaves ours on has reviewed it.
    if prediction is not None and prediction.applied and prediction.decision is None \
            and prediction.label in current_labels:
        return _decide(issue, prediction, "accepted", prediction.label, actor)
    return "recorded"


def _human_known_label_since(session, issue, prediction, current_labels, classes) -> str | None:
    added = session.scalars(select(LabelEvent.label).where(
        LabelEvent.issue_id == issue.id, LabelEvent.action.in_(ADDED), LabelEvent.actor_is_human.is_(True),
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
        LabelEvent.issue_id == issue.id, LabelEvent.action.in_(REMOVED), LabelEvent.actor_is_human.is_(True))))
