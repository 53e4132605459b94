"""What the review page shows: the bot's decisions on a repository's issues and what humans did since."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from core.tables import IssueRecord, LabelEvent, Prediction, Repository

PER_PAGE = 20
FILTERS = ("waiting", "corrected", "all")  # the page's tabs; "waiting" first, as the default
WAITING_OUTCOMES = ("suggested", "abstained", "shadow")  # the bot wrote nothing: a human has to decide
REVIEWABLE_OUTCOMES = ("applied", "suggested", "abstained", "shadow")
CHOICES = ("accept", "relabel", "reject")  # a review: keep the bot's label, pick another, or reject it


@dataclasses.dataclass(frozen=True)
class HumanAction:
    login: str | None
    action: str  # labeled | unlabeled | kept | dismissed | closed | ...
    label: str | None
    at: dt.datetime


_Timeline = list[tuple[dt.datetime, HumanAction]]


@dataclasses.dataclass(frozen=True)
class DecisionRow:
    prediction_id: int
    number: int
    title: str
    predicted: str | None
    scores: list[tuple[str, float]]  # highest first
    label: str | None  # the repository label the bot chose, None when it had none
    outcome: str
    reason: str
    decision: str | None
    confirmed_label: str | None
    confirmed_by: str | None
    created_at: dt.datetime
    since: list[HumanAction]  # humans' label events on the issue after the prediction, oldest first

    @property
    def reviewable(self) -> bool:
        """No human has decided yet, and the bot did something a human can confirm or undo."""
        return self.decision is None and self.confirmed_label is None and self.outcome in REVIEWABLE_OUTCOMES


@dataclasses.dataclass(frozen=True)
class DecisionPage:
    rows: list[DecisionRow]
    page: int
    pages: int
    total: int


def _filtered(query: Select, which: str) -> Select:
    if which == "waiting":
        return query.where(Prediction.outcome.in_(WAITING_OUTCOMES), Prediction.decision.is_(None),
                           IssueRecord.confirmed_label.is_(None))
    if which == "corrected":
        return query.where(Prediction.decision == "corrected")
    return query


def _of_repository(query: Select, repo: str) -> Select:
    return query.join(IssueRecord, Prediction.issue_id == IssueRecord.id) \
        .join(Repository, IssueRecord.repository_id == Repository.id).where(Repository.full_name == repo)


def decisions_page(session: Session, repo: str, which: str = "waiting", page: int = 1) -> DecisionPage:
    """One page of the repository's predictions under a filter, newest first."""
    total = session.scalar(_filtered(_of_repository(select(func.count(Prediction.id)), repo), which)) or 0
    pages = max(math.ceil(total / PER_PAGE), 1)
    page = min(max(page, 1), pages)
    query = _filtered(_of_repository(select(Prediction, IssueRecord), repo), which) \
        .order_by(Prediction.created_at.desc(), Prediction.id.desc()) \
        .limit(PER_PAGE).offset((page - 1) * PER_PAGE)
    found = session.execute(query).all()
    since = _human_actions(session, [issue.id for _, issue in found])
    rows = [_row(prediction, issue,
                 [action for at, action in since.get(issue.id, []) if at >= _aware(prediction.created_at)])
            for prediction, issue in found]
    return DecisionPage(rows, page, pages, total)


def waiting_counts(session: Session, repos: Iterable[str]) -> dict[str, int]:
    """How many predictions wait for review in each repository (missing: none)."""
    query = _filtered(select(Repository.full_name, func.count(Prediction.id))
                      .join(IssueRecord, Prediction.issue_id == IssueRecord.id)
                      .join(Repository, IssueRecord.repository_id == Repository.id)
                      .where(Repository.full_name.in_(list(repos))), "waiting").group_by(Repository.full_name)
    return dict(session.execute(query).all())


def is_shadow_mode(session: Session, repo: str) -> bool:
    """Whether the repository is in shadow mode, as its newest prediction was made (the config file is
    GitHub's; the page reads none): the bot writes nothing there, and its choices wait for a human."""
    newest = session.scalar(_of_repository(select(Prediction.outcome), repo)
                            .order_by(Prediction.created_at.desc(), Prediction.id.desc()).limit(1))
    return newest == "shadow"


def prediction_in(session: Session, repo: str, prediction_id: int) -> DecisionRow | None:
    """The prediction as a row, when it belongs to `repo` (None otherwise: the caller answers 404)."""
    found = session.execute(_of_repository(select(Prediction, IssueRecord), repo)
                            .where(Prediction.id == prediction_id)).first()
    return _row(found[0], found[1], []) if found else None


def _human_actions(session: Session, issue_ids: list[int]) -> dict[int, _Timeline]:
    """Humans' label events on these issues, oldest first, by issue."""
    events = session.scalars(select(LabelEvent).where(LabelEvent.issue_id.in_(issue_ids),
                                                      LabelEvent.actor_is_human.is_(True))
                             .order_by(LabelEvent.occurred_at, LabelEvent.id)) if issue_ids else []
    found: dict[int, _Timeline] = {}
    for event in events:
        at = _aware(event.occurred_at)
        action = HumanAction(event.actor_login, event.action, event.label, at)
        found.setdefault(event.issue_id, []).append((at, action))
    return found


def _row(prediction: Prediction, issue: IssueRecord, since: list[HumanAction]) -> DecisionRow:
    scores = sorted((prediction.scores or {}).items(), key=lambda item: -item[1])
    return DecisionRow(prediction.id, issue.number, issue.title, prediction.predicted, scores,
                       prediction.label, prediction.outcome, prediction.reason, prediction.decision,
                       issue.confirmed_label, issue.confirmed_by, _aware(prediction.created_at), since)


def _aware(moment: dt.datetime) -> dt.datetime:
    # SQLite hands back naive datetimes; every timestamp we write is UTC
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
