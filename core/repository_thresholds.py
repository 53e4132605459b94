"""A repository's per-kind thresholds for its target precision, measured on its own judged issues.

The (served scores, confirmed kind) pairs come from two places, one pair per issue:
- the serving version's predictions whose issue a human judged: `Prediction.scores` (what the bot served,
  memory included) against `IssueRecord.confirmed_label`; a label rejected with nothing put instead counts
  against the kind predicted. Abstentions a human labelled since count too: they are what lowers a threshold.
- the history in the memory: rows stored with the model's raw scores (core.memory.remember), each scored
  as the bot would have served it, by core.memory.adjust_scores with its nearest *other* confirmed issues
  (leave-one-out), so that no issue votes for itself.
Where an issue has both, its prediction counts: it is what was really served.

The result is cached on the Repository row with what it was computed from (model version, target, global
thresholds, and the counts that grow with the memory and the decisions). The feedback queue keeps it
current (`refresh_stored`, after each decision and memory fill); the labelling job reads it as stored
(`stale_ok`) and computes only when nothing is stored for its version and target: recomputing after every
decision would cost the labelling job a pass over the whole memory (docs/BENCHMARKS.md, "A precision
target per repository").
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core import memory
from core.tables import IssueRecord, MemoryEntry, ModelVersion, Prediction, Repository
from core.thresholds import DEFAULT, MIN_SUPPORT, Judged, KindThreshold, Quality, kind_thresholds, quality_at

APP_THRESHOLD = 0.5  # core.settings' ISSUE_SORTER_THRESHOLD default, for callers that do not pass theirs
# How the history is scored, in every cache key: a result stored by an earlier way of scoring it is
# recomputed, not served. 2: the memory read in confirmation order, as the labelling job reads it.
HISTORY_SCORING = 2


@dataclasses.dataclass(frozen=True)
class ThresholdStats:
    """What the thresholds rest on, for the log and the review page."""

    target: float
    kinds: dict[str, KindThreshold]  # every class: its threshold, where it came from, its support
    quality: Quality  # the repository's judged issues at these thresholds
    from_predictions: int  # judged issues that are the bot's own predictions
    from_history: int  # judged issues from the memory, scored leave-one-out

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping) -> ThresholdStats:
        return cls(data["target"], {kind: KindThreshold(**row) for kind, row in data["kinds"].items()},
                   Quality(**data["quality"]), data["from_predictions"], data["from_history"])


def repository_thresholds(session: Session, repository_id: int, version: str, classes: Sequence[str],
                          target: float, global_thresholds: Mapping[str, float] | None, *,
                          default_threshold: float = APP_THRESHOLD, min_support: int = MIN_SUPPORT,
                          store: bool = True, stale_ok: bool = False) -> tuple[dict[str, float], ThresholdStats]:
    """(kind → threshold for LabelingPolicy.per_label_thresholds, the stats behind them).

    A kind with `min_support` judged predictions here gets the repository's own threshold; else the global
    one (the model card's); kinds with neither are left out, so the policy's own threshold applies (the
    stats count them at `default_threshold`). `store`: write the result to the repository's cache.
    `stale_ok`: a stored result for the same inputs serves even when decisions or the memory moved since
    (the labelling job's read: the feedback queue refreshes it, `refresh_stored`); no query counts them."""
    global_thresholds = dict(global_thresholds or {})
    inputs = _inputs(version, target, global_thresholds, default_threshold, min_support)
    repository = session.get(Repository, repository_id)
    cached = repository.threshold_cache if repository is not None else None
    if stale_ok and cached and cached["key"][:len(inputs)] == inputs:
        return _served(ThresholdStats.from_json(cached["stats"]))
    key = inputs + _moved(session, repository_id, version)
    if cached and cached.get("key") == key:
        stats = ThresholdStats.from_json(cached["stats"])
    else:
        judged, from_predictions = judged_issues(session, repository_id, version, classes)
        kinds = kind_thresholds(judged, classes, target, global_thresholds, default_threshold, min_support=min_support)
        quality = quality_at(judged, {kind: row.threshold for kind, row in kinds.items()}, default_threshold)
        stats = ThresholdStats(target, kinds, quality, from_predictions, len(judged) - from_predictions)
        if store and repository is not None:
            repository.threshold_cache = {"key": key, "stats": stats.to_json()}
    return _served(stats)


def _served(stats: ThresholdStats) -> tuple[dict[str, float], ThresholdStats]:
    return {kind: row.threshold for kind, row in stats.kinds.items() if row.source != DEFAULT}, stats


def refresh_stored(session: Session, repository_id: int) -> ThresholdStats | None:
    """Recompute the repository's stored thresholds for the inputs they were stored with, where its
    decisions or memory moved since (the feedback queue's part); None when none are stored: the labelling
    job stores them the first time it serves a target."""
    repository = session.get(Repository, repository_id)
    cached = repository.threshold_cache if repository is not None else None
    if not cached:
        return None
    version, target, global_thresholds, default_threshold, min_support = cached["key"][:5]
    classes = list(cached["stats"]["kinds"])  # every class of the version, in its order
    return repository_thresholds(session, repository_id, version, classes, target, dict(global_thresholds),
                                 default_threshold=default_threshold, min_support=min_support)[1]


def last_target(repository: Repository, version: str) -> float | None:
    """The target this repository's thresholds were last stored for with `version` (None: none stored)."""
    cached = repository.threshold_cache
    return cached["stats"]["target"] if cached and cached["key"][0] == version else None


def judged_issues(session: Session, repository_id: int, version: str, classes: Sequence[str]
                  ) -> tuple[list[Judged], int]:
    """(the repository's judged issues, how many of them are predictions): predictions first, then history."""
    predicted = judged_predictions(session, repository_id, version, classes)
    history = judged_history(session, repository_id, version, classes, exclude=set(predicted))
    return list(predicted.values()) + history, len(predicted)


def judged_predictions(session: Session, repository_id: int, version: str, classes: Sequence[str]
                       ) -> dict[int, Judged]:
    """issue id → the version's newest prediction for it, against the kind a human confirmed."""
    rows = session.execute(
        select(Prediction.issue_id, Prediction.scores, Prediction.decision, IssueRecord.confirmed_label)
        .join(IssueRecord, Prediction.issue_id == IssueRecord.id)
        .join(ModelVersion, Prediction.model_version_id == ModelVersion.id)
        .where(IssueRecord.repository_id == repository_id, ModelVersion.version == version,
               (Prediction.decision.is_not(None)) | (IssueRecord.confirmed_label.is_not(None)))
        .order_by(Prediction.id)).all()
    judged = {}
    for issue_id, scores, decision, confirmed in rows:
        truth = memory.class_of(confirmed, classes) if confirmed else None
        usable = scores and set(classes) <= set(scores)
        if usable and (truth is not None or decision == "rejected"):  # else: a label outside the classes
            judged[issue_id] = Judged({c: float(scores[c]) for c in classes}, truth)
    return judged


def judged_history(session: Session, repository_id: int, version: str, classes: Sequence[str], *,
                   exclude: set[int] = frozenset()) -> list[Judged]:
    """The memory's rows with the model's raw scores, each adjusted by the rest of the memory."""
    rows = memory.read_rows(session, repository_id, version)
    kept = rows.rows_of(classes)  # the memory's rows below, by their position in `rows`
    # the memory as the labelling job reads it (core.memory.read_rows: oldest confirmed first), so that its
    # trust is the served one: the self-check's "latest" rows are the last confirmed, not the last stored
    # (a fill stores the newest first)
    held = rows.to_memory(classes)
    scores = [rows.scores[i] for i in kept]
    scored = [position for position, i in enumerate(kept)
              if rows.issue_ids[i] not in exclude and scores[position] and set(classes) <= set(scores[position])]
    if not scored:
        return []
    raw = [{c: float(scores[position][c]) for c in classes} for position in scored]
    # the vote's trust once for the whole memory: leaving one row of the self-check's latest out moves it
    # by a step of the clip at most
    served = leave_one_out(held.vectors, held.labels, scored, raw, trust=held.trust)
    return [Judged(adjusted, held.labels[position]) for position, adjusted in zip(scored, served, strict=True)]


def leave_one_out(vectors: np.ndarray, labels: Sequence[str], rows: Sequence[int],
                  raw_scores: Sequence[Mapping[str, float]], *, rule: memory.MemoryRule = memory.MemoryRule(),
                  trust: float = 1.0) -> list[dict[str, float]]:
    """Each of `rows`' raw scores adjusted by the memory (`vectors`: L2-normalised, `labels`) without itself:
    its `rule.neighbours` most similar other rows vote, and the label counts leave it out; `trust`: the
    vote's (Memory.trust)."""
    rows = list(rows)
    counts = Counter(labels)
    k = min(rule.neighbours, len(labels) - 1)
    similarities = vectors[rows] @ vectors.T  # (len(rows), n): one product and one partition for all rows
    similarities[np.arange(len(rows)), rows] = -np.inf
    nearest = np.argpartition(-similarities, k - 1, axis=1)[:, :k] if k > 0 else np.zeros((len(rows), 0), int)
    served = []
    for position, (row, scores) in enumerate(zip(rows, raw_scores, strict=True)):
        others = {**counts, labels[row]: counts[labels[row]] - 1}
        neighbours = [memory.Neighbour(labels[j], float(similarities[position, j])) for j in nearest[position]]
        neighbours.sort(key=lambda neighbour: -neighbour.similarity)
        served.append(memory.adjust_scores(scores, neighbours, others, rule=rule, trust=trust))
    return served


def _inputs(version: str, target: float, global_thresholds: Mapping[str, float], default_threshold: float,
            min_support: int) -> list:
    """The first part of the cache key, as stored JSON reads back: what the caller passes, then how the
    history is scored (refresh_stored reads the first five back)."""
    return [version, float(target), [[k, float(v)] for k, v in sorted(global_thresholds.items())],
            float(default_threshold), min_support, HISTORY_SCORING]


def _moved(session: Session, repository_id: int, version: str) -> list:
    """The rest of the cache key: the counts and times that move with the memory and the decisions (one
    query), as stored JSON reads back."""
    confirmed = (IssueRecord.repository_id == repository_id, IssueRecord.confirmed_label.is_not(None))
    remembered = (MemoryEntry.repository_id == repository_id, MemoryEntry.model_version == version)
    decisions = select(Prediction.decided_at).join(IssueRecord, Prediction.issue_id == IssueRecord.id).where(
        IssueRecord.repository_id == repository_id, Prediction.decision.is_not(None)).subquery()
    moved = session.execute(select(
        select(func.count()).select_from(IssueRecord).where(*confirmed).scalar_subquery(),
        select(func.max(IssueRecord.confirmed_at)).where(*confirmed).scalar_subquery(),
        select(func.count()).select_from(MemoryEntry).where(*remembered).scalar_subquery(),  # every row votes
        select(func.count()).select_from(MemoryEntry).where(*remembered, MemoryEntry.scores.is_not(None))
        .scalar_subquery(),
        select(func.count()).select_from(decisions).scalar_subquery(),
        select(func.max(decisions.c.decided_at)).scalar_subquery())).one()
    return [value if isinstance(value, int) else str(value) for value in moved]
