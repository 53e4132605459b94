"""A repository's quality page: live precision and coverage per week, what maintainers decided against what
the bot predicted, and the history of its models. Queries here; pictures in bot.review.charts."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from core import store
from core.kinds import kind_of_label
from core.tables import GLOBAL_SCOPE, IssueRecord, ModelVersion, Prediction, Repository, TrainingRun

MANAGING_ROLES = ("admin", "maintain")  # who may promote, roll back and retrain: the slash command's rule


@dataclasses.dataclass(frozen=True)
class Week:
    start: dt.date  # the week's Monday
    predictions: int
    applied: int
    judged: int  # applied predictions a human accepted, rejected or corrected
    accepted: int

    @property
    def coverage(self) -> float:
        """The share of new issues the bot labelled."""
        return self.applied / self.predictions if self.predictions else 0.0

    @property
    def precision(self) -> float | None:
        """Of the labels humans judged, the share they kept (None: nothing judged that week)."""
        return self.accepted / self.judged if self.judged else None


@dataclasses.dataclass(frozen=True)
class ModelRow:
    version: str
    scope: str
    created_at: dt.datetime
    macro_f1: float | None  # as evaluated at registration (NLBSE'24 protocol for the bootstrap)
    mean_repo_macro_f1: float | None
    unseen: float | None  # the unseen-repository protocol, when it was measured
    gate: str | None  # the last gate decision on it
    serving: bool


def weekly(session: Session, repo: str) -> list[Week]:
    """One row per ISO week with predictions, oldest first."""
    rows = session.execute(_repo_predictions(repo).with_only_columns(
        Prediction.created_at, Prediction.applied, Prediction.decision)).all()
    weeks: dict[dt.date, Counter] = {}
    for created, applied, decision in rows:
        day = (created if created.tzinfo else created.replace(tzinfo=dt.timezone.utc)).date()
        counts = weeks.setdefault(day - dt.timedelta(days=day.weekday()), Counter())
        counts["predictions"] += 1
        counts["applied"] += bool(applied)
        if applied and decision:
            counts["judged"] += 1
            counts["accepted"] += decision == "accepted"
    return [Week(start, c["predictions"], c["applied"], c["judged"], c["accepted"])
            for start, c in sorted(weeks.items())]


def decided_pairs(session: Session, repo: str) -> list[tuple[str, str]]:
    """(what the bot predicted, the kind a human confirmed) for every issue a human decided."""
    rows = session.execute(_repo_predictions(repo).with_only_columns(Prediction.predicted,
                                                                      IssueRecord.confirmed_label)
                           .where(IssueRecord.confirmed_label.is_not(None), Prediction.predicted.is_not(None)))
    return [(predicted, kind_of_label(confirmed) or confirmed) for predicted, confirmed in rows]


def model_history(session: Session, repo: str) -> list[ModelRow]:
    """The global models and the repository's own, oldest first, with their scores and the gate's word."""
    serving = store.serving_model_for(session, repo)
    versions = session.scalars(select(ModelVersion).where(or_(ModelVersion.scope == repo,
                                                              ModelVersion.scope == GLOBAL_SCOPE))
                               .order_by(ModelVersion.created_at, ModelVersion.id))
    gates = {run.challenger_version_id: run.message for run in session.scalars(
        select(TrainingRun).order_by(TrainingRun.started_at))}
    return [ModelRow(v.version, v.scope, v.created_at, v.metrics.get("macro_f1"), v.metrics.get("mean_repo_macro_f1"),
                     (v.metrics.get("unseen") or {}).get("mean_repo_macro_f1"), gates.get(v.id),
                     serving is not None and serving.id == v.id) for v in versions]


def may_manage(role: str) -> bool:
    return role in MANAGING_ROLES


def _repo_predictions(repo: str):
    return (select(Prediction).join(IssueRecord, Prediction.issue_id == IssueRecord.id)
            .join(Repository, IssueRecord.repository_id == Repository.id).where(Repository.full_name == repo))
