"""What the review page shows: the bot's decisions on a repository's issues and what humans did since."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from core.store import as_utc
from core.tables import IssueRecord, LabelEvent, ModelVersion, Prediction, Repository

PER_PAGE = 20
FILTERS = ("waiting", "corrected", "all")  # the page's tabs; "waiting" first, as the default
WAITING_OUTCOMES = ("suggested", "abstained", "shadow")  # the bot wrote nothing: a human has to decide
REVIEWABLE_OUTCOMES = ("applied", "suggested", "abstained", "shadow")
CHOICES = ("accept", "relabel", "reject")  # a review: keep the bot's label, pick another, or reject it
OWN_CHOICES = ("own-accept", "own-reject")  # a review of one own label beside the kind (issue 29)
SORTS = ("newest", "confidence")  # newest first, or the least confident first
OUTCOMES = ("applied", "suggested", "abstained", "shadow")  # the outcomes the outcome filter offers
BORDERLINE = 0.1  # a top score at most this far above its threshold is marked borderline
EXCERPT_CHARS = 280  # of an issue's body in the why-this-label panel


class BadView(ValueError):
    """A filter or sort the page does not have (the view answers 400 with this message)."""


@dataclasses.dataclass(frozen=True)
class View:
    """The list's filters and order, from the page's query string."""

    label: str | None = None  # the bot's label
    outcome: str | None = None
    min_score: float | None = None  # the top score, 0-1
    max_score: float | None = None
    sort: str = "newest"

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> View:
        outcome, sort = args.get("outcome") or None, args.get("sort") or "newest"
        if outcome is not None and outcome not in OUTCOMES:
            raise BadView(f"There is no outcome {outcome[:40]!r}: use one of {', '.join(OUTCOMES)}.")
        if sort not in SORTS:
            raise BadView(f"There is no order {sort[:40]!r}: use one of {', '.join(SORTS)}.")
        return cls((args.get("label") or "").strip()[:255] or None, outcome,
                   _score(args.get("min_score")), _score(args.get("max_score")), sort)

    @property
    def by_score(self) -> bool:
        return self.sort == "confidence" or self.min_score is not None or self.max_score is not None

    def args(self) -> dict[str, str]:
        """The query string's part of this view (the defaults left out)."""
        found = {"label": self.label, "outcome": self.outcome,
                 "sort": None if self.sort == "newest" else self.sort,
                 "min_score": self.min_score, "max_score": self.max_score}
        return {key: str(value) for key, value in found.items() if value is not None}

    def keeps(self, score: float) -> bool:
        return (self.min_score is None or score >= self.min_score) and \
            (self.max_score is None or score <= self.max_score)


def _score(raw: str | None) -> float | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadView(f"A score is a number from 0 to 1, not {raw[:20]!r}.") from None
    if not 0 <= value <= 1 or not math.isfinite(value):
        raise BadView(f"A score is a number from 0 to 1, not {raw[:20]!r}.")
    return value


@dataclasses.dataclass(frozen=True)
class Voter:
    """A confirmed issue among the nearest that voted on the prediction's scores."""

    number: int | None
    title: str | None  # None when the issue is no longer stored
    label: str
    similarity: float


@dataclasses.dataclass(frozen=True)
class HumanAction:
    login: str | None
    action: str  # labeled | unlabeled | kept | dismissed | closed | ...
    label: str | None
    at: dt.datetime


_Timeline = list[tuple[dt.datetime, HumanAction]]


@dataclasses.dataclass(frozen=True)
class OwnRow:
    """One of the repository's own labels the bot applied or suggested with a prediction."""

    label: str
    score: float
    outcome: str  # applied | suggested
    decision: str | None


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
    model_scores: list[tuple[str, float]] | None = None  # the model's own, before the memory; highest first
    voters: list[Voter] | None = None  # None: not recorded (no memory, or an older prediction)
    threshold: float | None = None
    model_version: str | None = None
    author: str | None = None
    excerpt: str = ""
    own: list[OwnRow] = dataclasses.field(default_factory=list)  # own labels applied or suggested beside it

    @property
    def score(self) -> float:
        """The top score, as served: the bot's confidence."""
        return self.scores[0][1] if self.scores else 0.0

    @property
    def borderline(self) -> bool:
        """The bot chose a label, with a top score just above its threshold."""
        return self.label is not None and self.threshold is not None and \
            self.threshold <= self.score < self.threshold + BORDERLINE

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


def _filtered(query: Select, which: str, view: View = View()) -> Select:
    if view.label is not None:
        query = query.where(Prediction.label == view.label)
    if view.outcome is not None:
        query = query.where(Prediction.outcome == view.outcome)
    if which == "waiting":
        return query.where(Prediction.outcome.in_(WAITING_OUTCOMES), Prediction.decision.is_(None),
                           IssueRecord.confirmed_label.is_(None))
    if which == "corrected":
        return query.where(Prediction.decision == "corrected")
    return query


def _joined(query: Select) -> Select:
    return query.join(IssueRecord, Prediction.issue_id == IssueRecord.id) \
        .join(Repository, IssueRecord.repository_id == Repository.id)


def of_repository(query: Select, repo: str) -> Select:
    return _joined(query).where(Repository.full_name == repo)


def decisions_page(session: Session, repo: str, which: str = "waiting", page: int = 1,
                   view: View = View()) -> DecisionPage:
    """One page of the repository's predictions under a tab and a view: newest first, or by confidence."""
    newest = (Prediction.created_at.desc(), Prediction.id.desc())
    if view.by_score:  # the top score is the JSON's largest value: compared here, not in SQL
        candidates = session.execute(_filtered(of_repository(select(Prediction.id, Prediction.scores), repo),
                                               which, view).order_by(*newest)).all()
        ranked = [(max((scores or {}).values(), default=0.0), pid) for pid, scores in candidates]
        ranked = [(score, pid) for score, pid in ranked if view.keeps(score)]
        if view.sort == "confidence":
            ranked.sort(key=lambda item: item[0])  # stable: equal scores stay newest first
        total = len(ranked)
    else:
        total = session.scalar(_filtered(of_repository(select(func.count(Prediction.id)), repo),
                                         which, view)) or 0
    pages = max(math.ceil(total / PER_PAGE), 1)
    page = min(max(page, 1), pages)
    query = _filtered(of_repository(select(Prediction, IssueRecord), repo), which, view)
    if view.by_score:
        ids = [pid for _, pid in ranked[(page - 1) * PER_PAGE:page * PER_PAGE]]
        found = sorted(session.execute(query.where(Prediction.id.in_(ids))).all(),
                       key=lambda pair: ids.index(pair[0].id))
    else:
        found = session.execute(query.order_by(*newest).limit(PER_PAGE).offset((page - 1) * PER_PAGE)).all()
    since = _human_actions(session, [issue.id for _, issue in found])
    versions = _versions(session, {prediction.model_version_id for prediction, _ in found})
    titles = _titles(session, found)
    rows = [_row(prediction, issue,
                 [action for at, action in since.get(issue.id, []) if at >= as_utc(prediction.created_at)],
                 versions=versions, titles=titles)
            for prediction, issue in found]
    return DecisionPage(rows, page, pages, total)


def _versions(session: Session, ids: set[int | None]) -> dict[int, str]:
    ids = {version_id for version_id in ids if version_id is not None}
    if not ids:
        return {}
    query = select(ModelVersion.id, ModelVersion.version).where(ModelVersion.id.in_(ids))
    return dict(session.execute(query).all())


def _titles(session: Session, found) -> dict[tuple[int, int], str]:
    """The stored titles of the confirmed issues that voted, by (repository id, number)."""
    wanted = {(issue.repository_id, voter.get("number")) for prediction, issue in found
              for voter in prediction.neighbours or () if voter.get("number") is not None}
    if not wanted:
        return {}
    repository_ids, numbers = {r for r, _ in wanted}, {n for _, n in wanted}
    rows = session.execute(select(IssueRecord.repository_id, IssueRecord.number, IssueRecord.title).where(
        IssueRecord.repository_id.in_(repository_ids), IssueRecord.number.in_(numbers))).all()
    return {(r, n): title for r, n, title in rows}


def waiting_counts(session: Session, repos: Iterable[str]) -> dict[str, int]:
    """How many predictions wait for review in each repository (missing: none)."""
    query = _filtered(_joined(select(Repository.full_name, func.count(Prediction.id)))
                      .where(Repository.full_name.in_(list(repos))), "waiting").group_by(Repository.full_name)
    return dict(session.execute(query).all())


def is_shadow_mode(session: Session, repo: str) -> bool:
    """Whether the repository is in shadow mode, as its newest prediction was made (the config file is
    GitHub's; the page reads none): the bot writes nothing there, and its choices wait for a human."""
    newest = _newest(session, repo)
    return newest is not None and newest.outcome == "shadow"


def held_reason(session: Session, repo: str) -> str | None:
    """Why the repository is held, as its newest prediction was made (its config file is broken or cannot be
    read: bot.labeling.config), with what to do; None when it is not held."""
    newest = _newest(session, repo)
    return newest.reason if newest is not None and newest.outcome == "held" else None


def _newest(session: Session, repo: str):
    """The outcome and reason of the repository's newest prediction, or None."""
    return session.execute(of_repository(select(Prediction.outcome, Prediction.reason), repo)
                           .order_by(Prediction.created_at.desc(), Prediction.id.desc()).limit(1)).first()


def prediction_in(session: Session, repo: str, prediction_id: int) -> DecisionRow | None:
    """The prediction as a row, when it belongs to `repo` (None otherwise: the caller answers 404)."""
    found = session.execute(of_repository(select(Prediction, IssueRecord), repo)
                            .where(Prediction.id == prediction_id)).first()
    return _row(found[0], found[1], []) if found else None


def _human_actions(session: Session, issue_ids: list[int]) -> dict[int, _Timeline]:
    """Humans' label events on these issues, oldest first, by issue."""
    events = session.scalars(select(LabelEvent).where(LabelEvent.issue_id.in_(issue_ids),
                                                      LabelEvent.actor_is_human.is_(True))
                             .order_by(LabelEvent.occurred_at, LabelEvent.id)) if issue_ids else []
    found: dict[int, _Timeline] = {}
    for event in events:
        at = as_utc(event.occurred_at)
        action = HumanAction(event.actor_login, event.action, event.label, at)
        found.setdefault(event.issue_id, []).append((at, action))
    return found


def _row(prediction: Prediction, issue: IssueRecord, since: list[HumanAction], *,
         versions: Mapping[int, str] | None = None, titles: Mapping[tuple[int, int], str] | None = None
         ) -> DecisionRow:
    scores = sorted((prediction.scores or {}).items(), key=lambda item: -item[1])
    model = sorted(prediction.model_scores.items(), key=lambda item: -item[1]) \
        if prediction.model_scores is not None else None
    voters = None if prediction.neighbours is None else [
        Voter(voter.get("number"), (titles or {}).get((issue.repository_id, voter.get("number"))),
              voter.get("label", ""), float(voter.get("similarity", 0.0))) for voter in prediction.neighbours]
    body = " ".join((issue.body or "").split())
    excerpt = body if len(body) <= EXCERPT_CHARS else body[:EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"
    return DecisionRow(prediction.id, issue.number, issue.title, prediction.predicted, scores,
                       prediction.label, prediction.outcome, prediction.reason, prediction.decision,
                       issue.confirmed_label, issue.confirmed_by, as_utc(prediction.created_at), since,
                       model_scores=model, voters=voters, threshold=prediction.threshold,
                       model_version=(versions or {}).get(prediction.model_version_id),
                       author=issue.author_login, excerpt=excerpt,
                       own=[OwnRow(own.label, own.score, own.outcome, own.decision)
                            for own in prediction.own_labels])

