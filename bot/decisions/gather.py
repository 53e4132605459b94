"""Gather: everything one decision on an issue reads, once: the stored issue, its latest prediction and the
sender's standing (bot.decisions.decide decides, bot.decisions.act records).

Whose events teach the App: a sender who may triage the repository (GitHub's triage, write, maintain or admin
role, asked of GitHub once per repository and login within ISSUE_SORTER_PERMISSION_CACHE_SECONDS), or a
signed-in reviewer on the review page, who was checked the same way. Anyone else's event (an author closing
their own issue, the labels an issue template adds, a drive-by label change) is recorded as history and
teaches nothing. The permission is asked only when the event could teach something.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Protocol

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from bot.github_api.client import TRIAGE_ROLES
from bot.github_api.issues import IssueSnapshot, event_time, has_text
from bot.intake.events import IssueEvent
from core import store
from core.tables import IssueRecord, LabelEvent, OwnLabelExample, Prediction, Repository

# An issue type set or removed (typed / untyped) is a maintainer's decision like a label's.
ADDED, REMOVED = ("labeled", "typed"), ("unlabeled", "untyped")
DECIDING = (*ADDED, *REMOVED, "closed")  # the actions that can decide something; `edited` only guards text


@dataclass(frozen=True)
class Actor:
    """Who sent an event: a human or a bot (this App among them), and whether they may triage the repository."""

    login: str | None
    is_human: bool
    is_this_app: bool
    may_triage: bool | None = None  # triage or more on the repository; None: not asked (it could not matter)

    @property
    def teaches(self) -> bool:
        """A maintainer's event: the only kind that becomes training data, memory, examples and verdicts."""
        return self.is_human and self.may_triage is True


def identify_actor(sender_login: str | None, sender_is_bot: bool, via_app_id: int | None, *,
                   bot_login: str | None, app_id: int | None) -> Actor:
    this_app = bool((bot_login and sender_login == bot_login) or (app_id and via_app_id == app_id))
    return Actor(sender_login, is_human=not (sender_is_bot or this_app), is_this_app=this_app)


def reviewer(login: str) -> Actor:
    """A signed-in reviewer: the review page let them in only with triage or more on the repository."""
    return Actor(login, is_human=True, is_this_app=False, may_triage=True)


@dataclass(frozen=True)
class OwnRow:
    """One of the repository's own labels the prediction applied or suggested, and what a human made of it."""

    label: str
    outcome: str  # applied | suggested
    decision: str | None  # accepted | rejected | None


@dataclass(frozen=True)
class PredictionState:
    """The issue's latest prediction, as decide needs it."""

    id: int
    label: str | None
    applied: bool
    outcome: str
    decision: str | None
    abstain_mark: str | None
    own: tuple[OwnRow, ...]

    @classmethod
    def of(cls, prediction: Prediction | None) -> PredictionState | None:
        if prediction is None:
            return None
        return cls(prediction.id, prediction.label, prediction.applied, prediction.outcome, prediction.decision,
                   prediction.abstain_mark, tuple(OwnRow(row.label, row.outcome, row.decision)
                                                  for row in prediction.own_labels))


@dataclass(frozen=True)
class DecisionInputs:
    """Plain data: everything bot.decisions.decide reads."""

    action: str
    label: str | None  # the label (or issue type) added or removed
    sender: Actor
    current_labels: tuple[str, ...]  # the issue's labels (and issue type) after the event
    classes: tuple[str, ...]  # the serving model's classes
    confirmed_label: str | None  # the kind label a maintainer confirmed before this event
    prediction: PredictionState | None
    maintainer_labels_since: tuple[str, ...] = ()  # labels maintainers added since the prediction, newest first
    stale: bool = False  # older than the issue's newest event: history only


@dataclass(frozen=True)
class Gathered:
    """One `issues` event and what it is decided on. `issue` is the stored row before the event (None: new)."""

    event: IssueEvent
    repository: Repository
    issue: IssueRecord | None
    judged: bool  # a maintainer had confirmed the issue's kind or an own label: its text is what they judged
    event_at: dt.datetime | None
    text_known: bool  # the event carries the issue's text (a retried job in dry-run has none)
    inputs: DecisionInputs


@dataclass(frozen=True)
class Sources:
    """What gathering reads besides the database: who this App is, and GitHub (None: dry-run, which can read
    neither an issue's text nor anyone's role)."""

    bot_login: str | None
    app_id: int | None
    github: IssueReader | None


class IssueReader(Protocol):
    def get_issue(self, repo: str, number: int) -> IssueSnapshot: ...

    def get_permission(self, repo: str, login: str) -> str: ...


def gather_event(session: Session, job: dict, sources: Sources) -> Gathered | str:
    """An `issues` job's event and its inputs, or why nothing is to be done (its label event is stored)."""
    event, text_known = IssueEvent.from_job(job), has_text(job["snapshot"])
    event_at = event_time(event.snapshot, event.received_at)
    repository = store.ensure_repository(session, event.repo, event.installation_id, github_id=event.repo_id,
                                         private=event.repo_private)
    issue = store.find_issue(session, repository, event.number)
    stale = issue is not None and not store.accepts_event(issue, event_at)
    serving = store.serving_model_for(session, repository.full_name)
    if is_event_recorded(session, event.delivery_id):  # a worker died before marking it done
        return "skipped: event already recorded"
    github = sources.github
    if not text_known and github is not None and event.action not in ("deleted", "transferred"):
        # a retry: the issue's text as GitHub has it now (a deleted or moved issue's is not stored anyway);
        # the rest of the delivery's copy (labels, state, time) still says what this event did
        fresh = github.get_issue(event.repo, event.number)
        event, text_known = replace(event, snapshot=replace(event.snapshot, title=fresh.title, body=fresh.body)), True
    judged = issue is not None and is_confirmed(session, issue)
    actor = identify_actor(event.sender_login, event.sender_is_bot, event.via_app_id,
                           bot_login=sources.bot_login, app_id=sources.app_id)
    if not stale and _needs_standing(event.action, actor, judged) and github is not None and actor.login:
        actor = replace(actor, may_triage=github.get_permission(event.repo, actor.login) in TRIAGE_ROLES)
    snapshot = event.snapshot
    current = snapshot.labels + ((snapshot.issue_type,) if snapshot.issue_type else ())
    inputs = inputs_for(session, issue, action=event.action, label=event.label, sender=actor,
                        current_labels=current, classes=tuple(serving.labels) if serving else (), stale=stale)
    return Gathered(event, repository, issue, judged, event_at, text_known, inputs)


def inputs_for(session: Session, issue: IssueRecord | None, *, action: str, label: str | None, sender: Actor,
               current_labels: tuple[str, ...], classes: tuple[str, ...], stale: bool = False) -> DecisionInputs:
    """The stored issue's side of a decision (its confirmed kind, latest prediction, the labels maintainers
    added since it): for a GitHub event (`gather_event`) and for a review (bot.review.decide) alike."""
    prediction = store.latest_prediction(session, issue) if issue is not None and sender.teaches else None
    since = _maintainer_labels_since(session, issue, prediction) if prediction is not None else ()
    return DecisionInputs(action, label, sender, tuple(current_labels), tuple(classes),
                          issue.confirmed_label if issue is not None else None, PredictionState.of(prediction),
                          since, stale)


def _needs_standing(action: str, actor: Actor, judged: bool) -> bool:
    """Whether the sender's role matters: a human's event that can decide, or an edit of a confirmed issue
    (a maintainer's edit keeps the confirmed text current, anyone else's leaves it as judged)."""
    return actor.is_human and (action in DECIDING or (action == "edited" and judged))


def is_confirmed(session: Session, issue: IssueRecord) -> bool:
    """A maintainer confirmed the issue's kind or one of its own labels: its stored text is what was judged."""
    return issue.confirmed_label is not None or session.scalar(
        select(OwnLabelExample.id).where(OwnLabelExample.issue_id == issue.id).limit(1)) is not None


def _maintainer_labels_since(session: Session, issue: IssueRecord, prediction: Prediction) -> tuple[str, ...]:
    """Labels maintainers added to the issue since the prediction, newest first: what may have replaced the
    bot's. An event recorded before senders were checked (None) counts as it did then, a human's."""
    return tuple(session.scalars(select(LabelEvent.label).where(
        LabelEvent.issue_id == issue.id, LabelEvent.action.in_(ADDED), LabelEvent.actor_is_human.is_(True),
        or_(LabelEvent.by_maintainer.is_(True), LabelEvent.by_maintainer.is_(None)),
        LabelEvent.occurred_at >= prediction.created_at).order_by(LabelEvent.id.desc())))


def is_event_recorded(session: Session, delivery_id: str | None) -> bool:
    """True when this delivery's label event is already stored (its job ran before, up to the commit)."""
    return delivery_id is not None and session.scalar(
        select(LabelEvent.id).where(LabelEvent.delivery_id == delivery_id)) is not None
