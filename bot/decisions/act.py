"""Act: record what one event decided (bot.decisions.decide): the label event as history, the issue's row, the
verdicts and the training data, and the issue's memory row after them.

What was learnt is the text that was judged: once a maintainer confirmed an issue's kind or an own label, an
edit by anyone else leaves the stored text as it was, so retraining, the memory and the own-label fits keep
reading what the maintainer saw. Taking the confirmation back instead would throw away every issue whose
author fixes a typo after triage. A maintainer's own event (an edit, a label, closing it) stores the issue's
text as it is then: they saw it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from bot.decisions.decide import Decision
from bot.decisions.gather import Actor, Gathered
from bot.decisions.transfers import move
from core import memory, own_labels, store
from core.db import session_scope
from core.repository_thresholds import refresh_stored
from core.tables import IssueRecord, LabelEvent, OwnLabelExample, Prediction, utcnow


@dataclass(frozen=True)
class Recorded:
    """What the job reports, and the work that follows it: thresholds to refresh, a mark to take off."""

    outcome: str
    repo: str  # the issue's repository and number, as the event named them
    number: int
    installation_id: int | None
    changed: bool = False  # a verdict, a confirmation or an example changed: the thresholds follow
    take_off: str | None = None  # the abstain label to take off the issue (bot.jobs queues the write)
    prediction_id: int | None = None  # the prediction whose abstain mark it is


def record(session: Session, gathered: Gathered, decision: Decision, *, embedder=None) -> Recorded:
    """Store the event and what it decided; `embedder` (the serving model, or None) embeds a newly confirmed
    issue into its repository's memory."""
    event, sender = gathered.event, gathered.inputs.sender
    where = {"repo": event.repo, "number": event.number, "installation_id": event.installation_id}
    if gathered.inputs.stale:
        add_label_event(session, gathered.issue, action=event.action, label=event.label, sender=sender,
                        delivery_id=event.delivery_id)
        return Recorded(f"{decision.outcome} ({gathered.issue.state})", **where)
    deleted = event.action == "deleted"
    # anyone but a maintainer editing a judged issue: its stored text stays the text that was judged
    text = gathered.text_known and not (gathered.judged and not sender.teaches)
    snapshot = event.snapshot
    issue, _ = store.upsert_issue(session, gathered.repository, event.number,
                                  title="" if deleted else snapshot.title if text else None,
                                  body="" if deleted else snapshot.body if text else None,
                                  author_login=snapshot.author_login,
                                  state={"deleted": "deleted", "transferred": "transferred"}.get(event.action,
                                                                                                snapshot.state),
                                  event_at=gathered.event_at)
    if event.action == "transferred" and event.moved_to:
        add_label_event(session, issue, action=event.action, label=event.label, sender=sender,
                        delivery_id=event.delivery_id)
        return Recorded(move(session, issue, gathered.repository, event.moved_to, snapshot.state),
                        changed=gathered.judged, **where)
    if deleted:  # a deleted issue keeps nothing of its text and no training label
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
        session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id))
    apply(session, issue, decision, action=event.action, label=event.label, sender=sender,
          delivery_id=event.delivery_id)
    memory.follow_confirmation(session, issue, embedder)  # its kind or own labels, confirmed or taken back
    return Recorded(decision.outcome, changed=deleted and gathered.judged or _changes(decision),
                    take_off=decision.take_off, **where,
                    prediction_id=gathered.inputs.prediction.id if gathered.inputs.prediction else None)


def apply(session: Session, issue: IssueRecord, decision: Decision, *, action: str, label: str | None,
          sender: Actor, delivery_id: str | None) -> None:
    """The event as history, then the decision on the issue's latest prediction and training data."""
    add_label_event(session, issue, action=action, label=label, sender=sender, delivery_id=delivery_id)
    if not _changes(decision):
        return
    prediction = store.latest_prediction(session, issue)
    if decision.verdict:
        prediction.decision, prediction.decided_at = decision.verdict, utcnow()
    if decision.unconfirm:
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
    if decision.confirm:
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = decision.confirm, utcnow(), sender.login
    for name, confirmed in decision.examples:
        if confirmed:
            own_labels.confirm(session, issue, name, sender.login)
        else:
            own_labels.unconfirm(session, issue, name)
    for name, verdict in decision.own_verdicts:
        row = next(row for row in prediction.own_labels if row.label == name and row.decision is None)
        row.decision, row.decided_at = verdict, utcnow()
    session.flush()


def add_label_event(session: Session, issue: IssueRecord, *, action: str, label: str | None, sender: Actor,
                    delivery_id: str | None) -> None:
    session.add(LabelEvent(issue_id=issue.id, delivery_id=delivery_id, action=action, label=label,
                           actor_login=sender.login, actor_is_human=sender.is_human,
                           by_this_app=sender.is_this_app,
                           by_maintainer=sender.may_triage if sender.is_human else False))


def _changes(decision: Decision) -> bool:
    return bool(decision.verdict or decision.unconfirm or decision.confirm or decision.examples
                or decision.own_verdicts)


def mark_taken_off(session: Session, prediction_id: int, label: str) -> bool:
    """The abstain label is off the issue: the prediction holds no mark to take off any more. False when the
    prediction is gone or holds another mark."""
    prediction = session.get(Prediction, prediction_id)
    if prediction is None or prediction.abstain_mark != label:
        return False
    prediction.abstain_mark = None
    return True


def refresh_after_decision(sessions: sessionmaker, repo: str) -> None:
    """After a decision or a fill, the repository's stored thresholds and own-label fits follow: on the
    feedback queue, so that the labelling job only reads them (core.repository_thresholds)."""
    with session_scope(sessions) as session:
        repository = store.find_repository(session, full_name=repo)
        if repository is not None:
            refresh_stored(session, repository.id)
            serving = store.serving_model_for(session, repo)  # the own labels' heads follow a promotion
            own_labels.refresh_stored(session, repository.id, serving.version if serving else None)
