"""A repository's quality page: live precision and coverage per week, its precision target (the per-kind
thresholds and what they give on its judged issues), what maintainers decided against what the bot
predicted, and the history of its models. Queries here; pictures in bot.review.charts."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from bot.decisions.stats import summarize
from bot.review.decisions import of_repository
from core import store
from core.kinds import kind_of_label
from core.repository_thresholds import ThresholdStats, last_target, repository_thresholds
from core.tables import (
    GLOBAL_SCOPE,
    IssueRecord,
    ModelVersion,
    OwnLabelDecision,
    OwnLabelExample,
    Prediction,
    Repository,
    TrainingRun,
)
from core.thresholds import DEFAULT_TARGET_PRECISION, MIN_SUPPORT

# Below this many judged labels a week's precision is shown with a warning: at 10 it is known to about
# ±30 points (2·sqrt(0.25/n)), so a week of 3 decisions says next to nothing.
MIN_WEEK_DECISIONS = 10


@dataclasses.dataclass(frozen=True)
class Week:
    start: dt.date  # the week's Monday
    predictions: int
    applied: int  # labels the bot chose: written, or (suggest, shadow mode) that it would have written
    judged: int  # of those, the ones a human accepted, rejected or corrected
    accepted: int
    precision: float | None  # of the labels humans judged, the share they kept (bot.decisions.stats: live precision)

    @property
    def coverage(self) -> float:
        """The share of new issues the bot labelled (or would have)."""
        return self.applied / self.predictions if self.predictions else 0.0

    @property
    def few(self) -> bool:
        """Too few decisions for the week's precision to mean much."""
        return self.judged < MIN_WEEK_DECISIONS


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
    weeks: dict[dt.date, list[Prediction]] = {}
    for prediction in session.scalars(of_repository(select(Prediction), repo)):
        day = store.as_utc(prediction.created_at).date()
        weeks.setdefault(day - dt.timedelta(days=day.weekday()), []).append(prediction)
    return [_week(start, found) for start, found in sorted(weeks.items())]


def _week(start: dt.date, predictions: list[Prediction]) -> Week:
    counts = summarize(predictions)
    return Week(start, len(predictions), counts["suggestions"], counts["judged"], counts["accepted"],
                counts["live_precision"])


@dataclasses.dataclass(frozen=True)
class PrecisionTarget:
    model: str  # the serving version the thresholds are for
    stats: ThresholdStats
    configured: bool  # the target is the one the labelling job last used here, not the default
    min_support: int = MIN_SUPPORT  # judged predictions of a kind before its own threshold counts


def precision_target(session: Session, repo: str, *, default_threshold: float) -> PrecisionTarget | None:
    """The serving model's thresholds on this repository and what they give on its judged issues (None: no
    model serves it). The target is the one its labelling job last used (its config's), else the default;
    the page reads the labelling job's cached result when nothing moved since, and stores nothing."""
    serving = store.serving_model_for(session, repo)
    repository = session.scalar(select(Repository).where(Repository.full_name == repo))
    if serving is None or repository is None:
        return None
    stored = last_target(repository, serving.version)
    target = stored if stored is not None else DEFAULT_TARGET_PRECISION
    _, stats = repository_thresholds(session, repository.id, serving.version, serving.labels, target,
                                     serving.metrics.get("thresholds"), default_threshold=default_threshold,
                                     store=False)
    return PrecisionTarget(serving.version, stats, stored is not None)


def decided_pairs(session: Session, repo: str) -> list[tuple[str, str]]:
    """(what the bot predicted, the kind a human confirmed) for every issue a human decided."""
    rows = session.execute(of_repository(select(Prediction), repo).with_only_columns(Prediction.predicted,
                                                                      IssueRecord.confirmed_label)
                           .where(IssueRecord.confirmed_label.is_not(None), Prediction.predicted.is_not(None)))
    return [(predicted, kind_of_label(confirmed) or confirmed) for predicted, confirmed in rows]


def model_history(session: Session, repo: str) -> list[ModelRow]:
    """The global models and the repository's own, oldest first, with their scores and the gate's word."""
    serving = store.serving_model_for(session, repo)
    versions = session.scalars(select(ModelVersion).where(or_(ModelVersion.scope == repo,
                                                              ModelVersion.scope == GLOBAL_SCOPE))
                               .order_by(ModelVersion.created_at, ModelVersion.id))
    # this repository's gate runs and the global scope's, never another repository's (a global version
    # judged on one repository's issues said so on every page); its own word wins over the global one
    runs = session.scalars(select(TrainingRun).where(TrainingRun.scope.in_((repo, GLOBAL_SCOPE))))
    gates = {run.challenger_version_id: run.message for run in sorted(
        runs, key=lambda run: (run.scope == repo, run.started_at, run.id))}
    return [ModelRow(v.version, v.scope, v.created_at, v.metrics.get("macro_f1"), v.metrics.get("mean_repo_macro_f1"),
                     (v.metrics.get("unseen") or {}).get("mean_repo_macro_f1"), gates.get(v.id),
                     serving is not None and serving.id == v.id) for v in versions]


OWN_COUNTS = ("applied", "accepted", "rejected", "suggested")


@dataclasses.dataclass(frozen=True)
class OwnLabelQuality:
    """One own label on the repository's predicted issues: how often the bot was right, how much it found."""

    label: str
    applied: int
    accepted: int
    rejected: int
    suggested: int
    carried: int  # predicted issues that carry it, as confirmed by a human (or put on and kept)
    found: int  # of those, the ones the bot applied it to

    @property
    def precision(self) -> float | None:
        judged = self.accepted + self.rejected
        return self.accepted / judged if judged else None

    @property
    def coverage(self) -> float | None:
        return self.found / self.carried if self.carried else None


def own_label_quality(session: Session, repo: str) -> list[OwnLabelQuality]:
    """Each own label's precision (applied and judged) and coverage (confirmed issues it was applied to)."""
    predicted = of_repository(select(Prediction), repo).with_only_columns(Prediction.id, Prediction.issue_id)
    issue_of = dict(session.execute(predicted).all())
    rows = session.scalars(select(OwnLabelDecision).where(
        OwnLabelDecision.prediction_id.in_(list(issue_of)))) if issue_of else []
    counts: Counter[tuple[str, str]] = Counter()  # (label, one of OWN_COUNTS)
    applied_on: set[tuple[int, str]] = set()
    for row in rows:
        counts[row.label, row.outcome] += 1
        if row.outcome == "applied":
            applied_on.add((issue_of[row.prediction_id], row.label))
            if row.decision in ("accepted", "rejected"):
                counts[row.label, row.decision] += 1
    carried: dict[str, list[int]] = {}
    if issue_of:
        for issue_id, label in session.execute(select(OwnLabelExample.issue_id, OwnLabelExample.label).where(
                OwnLabelExample.issue_id.in_(set(issue_of.values())))):
            carried.setdefault(label, []).append(issue_id)
    labels = sorted({label for label, _ in counts} | set(carried))
    return [OwnLabelQuality(label, **{key: counts[label, key] for key in OWN_COUNTS},
                            carried=len(carried.get(label, [])),
                            found=sum((issue, label) in applied_on for issue in carried.get(label, [])))
            for label in labels]
