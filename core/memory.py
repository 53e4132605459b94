"""A repository's memory of the issues its maintainers confirmed, and the rule that adjusts scores by it.

Each human-confirmed issue is stored with its embedding by the serving model's encoder (bot.decisions.feedback
writes it when the decision is recorded); the next issue of that repository is scored by the model, then
`adjust_scores` mixes in a vote of its most similar confirmed issues (kNN, cosine), each counted against
its kind's share of the memory, weighted by how far the vote beats the model on the repository's latest
confirmed issues (the self-check, `Memory.trust`). Nothing is retrained and nothing lives only in a process.

Rows embedded by another model version than the one serving are never compared with its embeddings (the
spaces differ). `fill` embeds a repository's newest confirmed issues that the serving version has not
embedded (a backfill's history, or all of them after a promotion) from their stored text, in batches on the
feedback queue (bot.jobs.fill_memory), and drops the other versions' rows once the serving one has caught up.
A labelling job only reads the memory.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import Session

from core import store
from core.issue_text import format_issue_text
from core.kinds import kind_of_label
from core.tables import IssueRecord, MemoryEntry, OwnLabelExample, Repository

log = logging.getLogger(__name__)

MEMORY_SIZE = 2000  # newest confirmed issues kept per repository (and model version)


@dataclass(frozen=True)
class MemoryRule:
    """How the memory adjusts a model's scores; the defaults are what serves, chosen on repositories never
    trained on, replayed as installs of 0 to 1,000 confirmed issues (docs/BENCHMARKS.md, "The memory's
    rule"): the best gain among the rules that never leave the model worse off on any of them."""

    neighbours: int = 5  # confirmed issues that vote
    knn_weight: float = 0.7  # w: the vote's share, as an exponent
    prior_smoothing: float = 2.0  # α: pseudo-count per class of the memory's shares, so none is ever 0
    vote_smoothing: float = 0.05  # pseudo-vote per class: no single vote can zero a class the model believes in
    # The self-check (Memory.trust): the vote weighs only as far as it beats the model's own answers on the
    # repository's latest confirmed issues, trust = clip(gain × (agreement − the model's accuracy), 0, 1).
    self_check_gain: float = 8.0
    self_check_issues: int = 50  # the memory's latest rows the self-check predicts, each from all the others


@dataclass(frozen=True)
class Neighbour:
    label: str  # a class of the model
    similarity: float  # cosine similarity to the issue being scored
    number: int | None = None  # the confirmed issue's number, when the memory knows it (read_rows does)


def adjust_scores(scores: Mapping[str, float], neighbours: Sequence[Neighbour],
                  label_counts: Mapping[str, int], *, rule: MemoryRule = MemoryRule(),
                  trust: float = 1.0) -> dict[str, float]:
    """normalise(model)^(1-w') × vote^w', with w' = w · trust.

    `scores` are the model's probabilities; `label_counts` the repository's confirmed issues per class;
    `neighbours` its most similar confirmed issues; `trust` in [0, 1], how far the memory's vote has earned
    its weight (`Memory.trust`, the self-check; 1: the full weight). The vote counts each neighbour against
    its class's share of the memory, so a majority kind cannot outvote a minority one by its numbers alone.
    An empty memory returns the scores unchanged.
    """
    classes = list(scores)
    total = sum(label_counts.get(c, 0) for c in classes)
    if total == 0:
        return dict(scores)
    shares = {c: (label_counts.get(c, 0) + rule.prior_smoothing) / (total + rule.prior_smoothing * len(classes))
              for c in classes}
    model = _normalise({c: max(scores[c], 1e-9) for c in classes})
    weight = rule.knn_weight * trust if neighbours else 0.0
    vote = knn_vote(neighbours, classes, shares, smoothing=rule.vote_smoothing)
    return _normalise({c: model[c] ** (1 - weight) * vote[c] ** weight for c in classes})


def knn_vote(neighbours: Sequence[Neighbour], classes: Sequence[str], shares: Mapping[str, float], *,
             smoothing: float = MemoryRule.vote_smoothing) -> dict[str, float]:
    """Each class's share of the neighbours' similarity (negative similarities count 0), smoothed, each
    neighbour's similarity divided by C × its class's share of the memory (`shares`, smoothed): in a
    balanced memory that changes nothing."""
    votes = Counter({c: smoothing for c in classes})
    for neighbour in neighbours:
        if neighbour.label in votes:
            votes[neighbour.label] += max(neighbour.similarity, 0.0) * (1.0 / (len(classes) * shares[neighbour.label]))
    return _normalise(dict(votes))


def self_check_agreement(vectors: np.ndarray, labels: Sequence[str], *, k: int, rows: Sequence[int],
                         smoothing: float = MemoryRule.prior_smoothing) -> tuple[float, float]:
    """(how often the vote of its k most similar other rows names the label of each of `rows`, how often
    the memory's most frequent label does): the memory predicting itself, leave-one-out."""
    rows = np.asarray(rows, dtype=int)
    classes = sorted(set(labels))
    index = np.array([classes.index(label) for label in labels])
    counts = np.bincount(index, minlength=len(classes))
    sims = np.array(vectors[rows] @ vectors.T, dtype=np.float64)
    sims[np.arange(len(rows)), rows] = -np.inf  # leave the row itself out
    k = min(k, len(labels) - 1)
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    weights = np.maximum(np.take_along_axis(sims, top, axis=1), 0.0)
    weights = weights / (counts[index[top]] + smoothing)  # argmax only: orders the classes as knn_vote does
    votes = np.zeros((len(rows), len(classes)))
    np.add.at(votes, (np.arange(len(rows))[:, None], index[top]), weights)
    agreement = float(np.mean(votes.argmax(axis=1) == index[rows]))
    return agreement, float(np.mean(index[rows] == counts.argmax()))


def _normalise(values: Mapping[str, float]) -> dict[str, float]:
    total = sum(values.values())
    if not total or not math.isfinite(total):
        return {c: 1 / len(values) for c in values}
    return {c: v / total for c, v in values.items()}


def class_of(label: str, classes: Sequence[str]) -> str | None:
    """The model class a confirmed repository label stands for ("enhancement" → "feature"), or None."""
    if label in classes:
        return label
    kind = kind_of_label(label)
    return kind if kind in classes else None


@dataclass(frozen=True)
class Memory:
    """A repository's confirmed issues as one model version embedded them, and the rule that adjusts by them."""

    vectors: np.ndarray  # (n, d) float32, rows L2-normalised
    labels: list[str]  # the model class of each row
    numbers: list[int] = field(default_factory=list)  # each row's issue number (read_rows'; empty: unknown)
    # each row's class by the model's own scores stored with it (None: not stored; empty: none known)
    model_labels: list[str | None] = field(default_factory=list)
    rule: MemoryRule = MemoryRule()

    def __len__(self) -> int:
        return len(self.labels)

    def nearest(self, vector: Sequence[float], k: int | None = None) -> list[Neighbour]:
        """The k (the rule's neighbours) most similar confirmed issues (cosine: the rows and the query are
        normalised)."""
        if not self.labels:
            return []
        similarities = self.vectors @ normalised(vector)
        top = np.argsort(-similarities)[:self.rule.neighbours if k is None else k]
        return [Neighbour(self.labels[i], float(similarities[i]), self.numbers[i] if self.numbers else None)
                for i in top]

    def label_counts(self) -> dict[str, int]:
        return dict(Counter(self.labels))

    @cached_property
    def trust(self) -> float:
        """How far this memory's vote has earned its weight, in [0, 1]: its latest rows predicted
        leave-one-out by the vote, against the model's own answers on them (stored with the rows; against
        the memory's most frequent label where none are)."""
        if len(self) < 2:
            return 0.0
        latest = range(max(0, len(self) - self.rule.self_check_issues), len(self))
        agreement, reference = self_check_agreement(self.vectors, self.labels, k=self.rule.neighbours,
                                                    rows=latest, smoothing=self.rule.prior_smoothing)
        known = [i for i in latest if self.model_labels and self.model_labels[i] is not None]
        if known:
            reference = sum(self.model_labels[i] == self.labels[i] for i in known) / len(known)
        return min(max(self.rule.self_check_gain * (agreement - reference), 0.0), 1.0)

    def adjust(self, scores: Mapping[str, float], vector: Sequence[float]) -> dict[str, float]:
        """adjust_scores with this memory's neighbours of `vector`, its label counts and its trust."""
        return self.adjust_with_neighbours(scores, vector)[0]

    def adjust_with_neighbours(self, scores: Mapping[str, float], vector: Sequence[float]
                               ) -> tuple[dict[str, float], list[Neighbour]]:
        """`adjust`, and the neighbours that voted (the review page shows them with the prediction)."""
        neighbours = self.nearest(vector)
        return adjust_scores(scores, neighbours, self.label_counts(), rule=self.rule, trust=self.trust), neighbours


def normalised(vector: Sequence[float]) -> np.ndarray:
    """`vector` as float32 of unit length (a zero vector as it is), as the memory's rows and queries compare."""
    array = np.asarray(vector, dtype=np.float32)
    return array / (float(np.linalg.norm(array)) or 1.0)


# ---- storage -----------------------------------------------------------------------------------------

FILL_BATCH = 64  # confirmed issues embedded between two commits of a fill: what a crash can cost again
# The label of the row of an issue a human confirmed only own labels of (core.own_labels), no kind: no class
# of any model (class_of names none), so the kind's vote and thresholds never count it; the own labels'
# vote does. Such rows are kept MEMORY_SIZE of their own, so they never push a kind's row out.
NO_KIND = ""


@dataclass(frozen=True)
class MemoryRows:
    """A repository's memory rows as `version` embedded them, oldest confirmed first, every label kept: one
    read serves the kind's memory (`to_memory`) and the own labels' (core.own_labels.memory_of)."""

    issue_ids: list[int]
    labels: list[str]  # the label a human confirmed, as stored
    vectors: np.ndarray  # (n, d) float32, rows L2-normalised; (0, 0) when empty
    numbers: list[int]
    scores: list[Mapping[str, float] | None]

    def rows_of(self, classes: Sequence[str]) -> list[int]:
        """The positions of the rows whose label maps onto one of `classes`: the rows `to_memory` keeps."""
        return [i for i, label in enumerate(self.labels) if class_of(label, classes) is not None]

    def to_memory(self, classes: Sequence[str]) -> Memory:
        """The kind's memory: labels mapped onto `classes`, rows of other labels left out."""
        kept = self.rows_of(classes)
        if not kept:
            return Memory(np.zeros((0, 0), dtype=np.float32), [])
        return Memory(self.vectors[kept], [class_of(self.labels[i], classes) for i in kept],
                      [self.numbers[i] for i in kept], [model_label(self.scores[i], classes) for i in kept])


def read_rows(session: Session, repository_id: int, version: str, *, exclude_issue: int | None = None
              ) -> MemoryRows:
    """The repository's memory as `version` embedded it, in the order its issues were confirmed (the
    self-check's "latest" are the last rows), one query."""
    rows = session.execute(select(MemoryEntry.issue_id, MemoryEntry.label, MemoryEntry.embedding, IssueRecord.number,
                                  MemoryEntry.scores)
                           .join(IssueRecord, IssueRecord.id == MemoryEntry.issue_id).where(
        MemoryEntry.repository_id == repository_id, MemoryEntry.model_version == version,
        MemoryEntry.issue_id != (exclude_issue or -1))
        .order_by(IssueRecord.confirmed_at.asc().nulls_first(), IssueRecord.id.asc())).all()
    vectors = (np.stack([np.frombuffer(blob, dtype="<f4") for _, _, blob, _, _ in rows]) if rows
               else np.zeros((0, 0), dtype=np.float32))
    return MemoryRows([row[0] for row in rows], [row[1] for row in rows], vectors, [row[3] for row in rows],
                      [row[4] for row in rows])


def model_label(scores: Mapping[str, float] | None, classes: Sequence[str]) -> str | None:
    """The class the model's own stored scores put first; "" when several share the top (the model named
    none, which the self-check counts as wrong); None when no scores were stored."""
    if not scores or not set(classes) <= set(scores):
        return None
    top = max(scores[c] for c in classes)
    first = [c for c in classes if scores[c] == top]
    return first[0] if len(first) == 1 else ""


def remember(session: Session, issue: IssueRecord, label: str, version: str, vector: Sequence[float],
             scores: Mapping[str, float] | None = None, *, size: int = MEMORY_SIZE) -> None:
    """Store (or replace) the issue's entry for `version`, then keep the repository's newest `size`.

    `scores`: the model's own scores of the issue, kept beside it so the repository's thresholds can be
    measured on its history (core.repository_thresholds); None keeps those already stored."""
    entry = session.scalar(select(MemoryEntry).where(MemoryEntry.issue_id == issue.id,
                                                     MemoryEntry.model_version == version))
    if entry is None:
        entry = MemoryEntry(repository_id=issue.repository_id, issue_id=issue.id, model_version=version)
        session.add(entry)
    entry.label, entry.embedding = label, normalised(vector).astype("<f4").tobytes()  # little-endian
    if scores is not None:
        entry.scores = {c: float(v) for c, v in scores.items()}
    session.flush()
    _keep_newest(session, issue.repository_id, version, own_only=label == NO_KIND, size=size)


def _keep_newest(session: Session, repository_id: int, version: str, *, own_only: bool, size: int) -> None:
    """The newest `size` by confirmation, as the fill chooses them (_is_missing): by row id, a fill that
    stores newest-first would trim what it just stored; rows of a kind and NO_KIND rows apart."""
    stale = select(MemoryEntry.id).join(IssueRecord, IssueRecord.id == MemoryEntry.issue_id) \
        .where(MemoryEntry.repository_id == repository_id, MemoryEntry.model_version == version,
               (MemoryEntry.label == NO_KIND) if own_only else (MemoryEntry.label != NO_KIND)) \
        .order_by(*(_newest_own_first() if own_only else _newest_confirmed_first())).offset(size)
    session.execute(delete(MemoryEntry).where(MemoryEntry.id.in_(stale.scalar_subquery())))


def forget(session: Session, issue: IssueRecord) -> None:
    """The issue's label was taken back (or the issue deleted): it leaves the memory of every version."""
    session.execute(delete(MemoryEntry).where(MemoryEntry.issue_id == issue.id))


def not_embedded(session: Session, repository_id: int, version: str, limit: int = MEMORY_SIZE, *,
                 size: int = MEMORY_SIZE) -> list[IssueRecord]:
    """Confirmed issues among the repository's newest `size` that `version` has not embedded yet, newest
    first."""
    return list(session.scalars(select(IssueRecord).where(_is_missing(repository_id, version, size))
                                .order_by(*_newest_confirmed_first()).limit(limit)))


def _is_missing(repository_id: int, version: str, size: int):
    newest = select(IssueRecord.id).where(IssueRecord.repository_id == repository_id,
                                          IssueRecord.confirmed_label.is_not(None)) \
        .order_by(*_newest_confirmed_first()).limit(size)
    newest_own = select(IssueRecord.id).where(IssueRecord.repository_id == repository_id,
                                              _only_own_labels()).order_by(*_newest_own_first()).limit(size)
    embedded = select(MemoryEntry.issue_id).where(MemoryEntry.model_version == version,
                                                  MemoryEntry.repository_id == repository_id)
    return (IssueRecord.id.in_(newest.scalar_subquery()) | IssueRecord.id.in_(newest_own.scalar_subquery())) \
        & IssueRecord.id.not_in(embedded.scalar_subquery())


def _only_own_labels():
    """An issue with no confirmed kind that a human confirmed one of the repository's own labels of."""
    return IssueRecord.confirmed_label.is_(None) & exists().where(OwnLabelExample.issue_id == IssueRecord.id)


def _newest_confirmed_first() -> tuple:
    # NULLS LAST spelt out: PostgreSQL sorts NULL first in DESC, SQLite last
    return IssueRecord.confirmed_at.desc().nulls_last(), IssueRecord.id.desc()


def _newest_own_first() -> tuple:
    """Issues of own labels only, by when their first own label was confirmed, newest first."""
    first = select(func.min(OwnLabelExample.confirmed_at)).where(OwnLabelExample.issue_id == IssueRecord.id) \
        .scalar_subquery()
    return first.desc().nulls_last(), IssueRecord.id.desc()


def drop_other_versions(session: Session, repository_id: int, version: str) -> None:
    """Rows no serving model can use any more, once `version` has embedded the whole memory."""
    session.execute(delete(MemoryEntry).where(MemoryEntry.repository_id == repository_id,
                                              MemoryEntry.model_version != version))


def can_embed(embedder) -> bool:
    """Whether a model embeds text at all (an encoder does; TF-IDF alone does not)."""
    return embedder is not None and (hasattr(embedder, "predict_and_embed") or hasattr(embedder, "embed"))


def embed_and_remember(session: Session, issues: Sequence[IssueRecord], embedder, *, size: int = MEMORY_SIZE
                       ) -> None:
    """Embed confirmed `issues` from their stored text and store them as the embedder's version's entries,
    with the model's scores of each where one forward pass gives both (`predict_and_embed`)."""
    texts = [format_issue_text(issue.title, issue.body) for issue in issues]
    if hasattr(embedder, "predict_and_embed"):
        scores, vectors = embedder.predict_and_embed(texts)
    else:
        scores, vectors = [None] * len(texts), embedder.embed(texts)
    for issue, row, vector in zip(issues, scores, vectors, strict=True):
        label = issue.confirmed_label if issue.confirmed_label is not None else NO_KIND
        remember(session, issue, label, embedder.version, vector, scores=row, size=size)


def follow_confirmation(session: Session, issue: IssueRecord, embedder, *, size: int = MEMORY_SIZE) -> None:
    """The issue's rows follow what humans confirmed of it, its kind or its own labels: gone once nothing
    is confirmed any more; relabelled where a version holds it under another label (an embedding is of the
    text, not of its label: not embedded again); embedded by `embedder`'s version where that version lacks
    it (None, or TF-IDF alone: nothing embedded, the next fill catches up)."""
    label = issue.confirmed_label if issue.confirmed_label is not None else NO_KIND
    if label == NO_KIND and not session.scalar(select(exists().where(OwnLabelExample.issue_id == issue.id))):
        forget(session, issue)
        return
    rows = session.scalars(select(MemoryEntry).where(MemoryEntry.issue_id == issue.id)).all()
    for entry in rows:
        if entry.label != label:
            entry.label = label
            session.flush()
            _keep_newest(session, issue.repository_id, entry.model_version, own_only=label == NO_KIND, size=size)
    if can_embed(embedder) and all(entry.model_version != embedder.version for entry in rows):
        embed_and_remember(session, [issue], embedder, size=size)


@dataclass(frozen=True)
class FillProgress:
    """How far one model version has embedded a repository's memory."""

    version: str  # the model version that embeds
    embedded: int  # confirmed issues, of the newest the memory keeps, that this version has embedded
    of: int  # confirmed issues the memory holds when complete (at most its size)

    @property
    def complete(self) -> bool:
        return self.embedded >= self.of

    def describe(self) -> str:
        return f"{self.embedded:,} of {self.of:,} issues embedded by {self.version}"


def fill(session: Session, repository_id: int, embedder, *, batch: int = FILL_BATCH,
         checkpoint: Callable[[], None] | None = None, size: int = MEMORY_SIZE) -> FillProgress:
    """Embed the confirmed issues (of the newest `size`) that `embedder`'s version has not embedded,
    `batch` at a time; after each batch its progress is stored on the repository and `checkpoint` (the
    job's commit) called, so an interrupted fill continues where it stopped. Once the memory is complete,
    and the version still serves the repository, the other versions' rows go."""
    if batch < 1:
        raise ValueError(f"fill: batch must be at least 1 issue, not {batch}")
    repository = session.get(Repository, repository_id)
    if repository is None:
        raise ValueError(f"fill: no repository has the id {repository_id}")
    progress = record_progress(session, repository, embedder.version, size=size)
    # bounded: each pass embeds `batch` missing issues, and at most `size` can be missing
    for _ in range(math.ceil(size / batch)):
        missing = not_embedded(session, repository_id, embedder.version, limit=batch, size=size)
        if not missing:
            break
        embed_and_remember(session, missing, embedder, size=size)
        progress = record_progress(session, repository, embedder.version, size=size)
        log.info("memory of %s: %s", repository.full_name, progress.describe())
        if checkpoint is not None:
            checkpoint()
    serving = store.serving_model_for(session, repository.full_name)
    if progress.complete and serving is not None and serving.version == embedder.version:
        drop_other_versions(session, repository_id, embedder.version)  # not if a newer version serves by now
    if checkpoint is not None:
        checkpoint()
    return progress


def record_progress(session: Session, repository: Repository, version: str, *, size: int = MEMORY_SIZE
                    ) -> FillProgress:
    """Count `version`'s share of the repository's memory and store it on the repository (the review page
    shows it)."""
    of = sum(min(size, session.scalar(select(func.count(IssueRecord.id)).where(
        IssueRecord.repository_id == repository.id, confirmed)) or 0)
        for confirmed in (IssueRecord.confirmed_label.is_not(None), _only_own_labels()))
    missing = session.scalar(select(func.count(IssueRecord.id)).where(_is_missing(repository.id, version, size))) or 0
    repository.memory_version, repository.memory_embedded, repository.memory_of = version, of - missing, of
    session.flush()
    return FillProgress(version, of - missing, of)


def stored_progress(repository: Repository) -> FillProgress | None:
    """The progress the last fill stored on the repository; None before any fill."""
    if repository.memory_version is None:
        return None
    return FillProgress(repository.memory_version, repository.memory_embedded or 0, repository.memory_of or 0)
