"""Which of a repository's labels can be its *own* labels beside the kind (issue 29): areas, components,
topics (`module:linear_model`, `streaming`, `dataset-viewer`). A label is no candidate when it names a kind
(core.kinds) or a step of the process rather than what the issue is about (`good first issue`,
`needs triage`, `duplicate`, `wontfix`, ...): those say what to do with an issue, and a model that learnt
them would learn a maintainer's workload, not the text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from core.kinds import RULES
from core.tables import IssueRecord, MemoryEntry, OwnLabelExample
from core.thresholds import lowest_threshold

# Process labels, by the words GitHub's defaults and large projects use for them.
PROCESS = re.compile(
    r"good.first.issue|first.timers?|help.wanted|beginner|easy|hacktoberfest|"
    r"triage|needs?.(info|more|repro|review|investigation|decision|discussion|feedback|response)|"
    r"awaiting|waiting|blocked|in.progress|wip|stale|inactive|"
    r"duplicate|wontfix|won.t.fix|invalid|not.planned|can.t.reproduce|cannot.reproduce|works.for.me|"
    r"answered|resolved|fixed|closed|released|backport|"
    r"priority|\bp[0-4]\b|severity|critical|high|low|urgent|"
    r"breaking|regression.confirmed|confirmed|accepted|approved|"
    r"dependencies|ci\b|chore|spam",
    re.IGNORECASE)


# What a kind label may hold beside its kind's word: `Type: Bug`, `kind/feature`, `C-bug`, `Bug Report`.
KIND_FILLERS = re.compile(r"\b(type|kind|category|issue|is|c|t|request|report|reports|change)\b")


def is_candidate(label: str) -> bool:
    """Whether `label` may be one of the repository's own labels: no process label, and no kind label
    unless it says more than its kind (`dataset bug` is an area's bugs; `Type: Bug` only the kind)."""
    if PROCESS.search(label):
        return False
    return bool(re.search(r"[a-z0-9]", _without_kind_words(label.lower())))


def _without_kind_words(label: str) -> str:
    label = re.sub(r"[-/_:.]", " ", label)
    for _, pattern in RULES:
        label = re.sub(pattern, " ", label)
    return KIND_FILLERS.sub(" ", label)


def candidates(labels: Iterable[str]) -> list[str]:
    """The candidates among `labels`, in their order, each once."""
    return list(dict.fromkeys(label for label in labels if is_candidate(label)))


# ---- the vote: each own label scored by the repository's confirmed issues (bench.own_labels replays it) --

DEFAULT_MIN_EXAMPLES = 5  # confirmed examples before a label is applied; below, a review page suggestion
NEIGHBOURS = 10  # confirmed issues that vote (bench.own_labels: k = 10 gave the best precision at 0.85)
SUGGEST_SCORE = 0.5  # a label not applied is suggested from this vote on (half its neighbours' weight)


def vote(similarities: np.ndarray, carries: np.ndarray, k: int) -> np.ndarray:
    """(rows, labels) scores: for each row of `similarities` (rows × memory), the similarity-weighted share
    of its k nearest memory rows that carry each label (`carries`: memory × labels, 0/1)."""
    k = min(k, similarities.shape[1])
    nearest = np.argpartition(-similarities, k - 1, axis=1)[:, :k]
    weights = np.clip(np.take_along_axis(similarities, nearest, axis=1), 0, None)  # (rows, k)
    votes = np.einsum("rk,rkl->rl", weights, carries[nearest])
    return votes / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)


def thresholds_on_memory(vectors: np.ndarray, carries: np.ndarray, served: np.ndarray, k: int,
                         target: float) -> np.ndarray:
    """Per label, the lowest threshold at which the memory's own rows, each scored by the others, are
    labelled at `target` precision; inf where none reaches it or the label is not served yet."""
    result = np.full(carries.shape[1], np.inf)
    if len(vectors) < 2 or not served.any():
        return result
    similarities = vectors @ vectors.T
    np.fill_diagonal(similarities, -np.inf)
    scores = vote(similarities, carries, k)
    for label in np.flatnonzero(served):
        # the rows most likely to carry it: every row scored, correct when it does carry it
        found = lowest_threshold(scores[:, label].tolist(), carries[:, label].astype(bool).tolist(), target)
        result[label] = np.inf if found is None else max(found, 1e-9)  # a score of 0 never applies a label
    return result


@dataclass(frozen=True)
class OwnScore:
    """One own label's decision input: its vote, the threshold it needs (None: not served) and examples."""

    label: str
    score: float
    threshold: float | None  # None: fewer than min_examples confirmed, or no threshold keeps the target
    examples: int


@dataclass(frozen=True)
class OwnLabelMemory:
    """A repository's confirmed issues as one model version embedded them, and the own labels they carry."""

    vectors: np.ndarray  # (n, d) float32, rows L2-normalised (core.memory's rows)
    labels: list[frozenset[str]]  # the own labels a human confirmed on each row's issue
    examples: dict[str, int] = field(default_factory=dict)  # label → confirmed examples in the repository

    def __len__(self) -> int:
        return len(self.labels)

    def score(self, vector: Sequence[float], candidates: Sequence[str], *, min_examples: int,
              target: float, k: int = NEIGHBOURS) -> list[OwnScore]:
        """Each candidate's vote for the issue embedded as `vector`, and its threshold at `target`."""
        if not candidates:
            return []
        carries = np.array([[name in row for name in candidates] for row in self.labels], dtype=np.float32)
        examples = [self.examples.get(name, 0) for name in candidates]
        if not len(self):
            return [OwnScore(name, 0.0, None, n) for name, n in zip(candidates, examples, strict=True)]
        query = np.asarray(vector, dtype=np.float32)
        query = query / (float(np.linalg.norm(query)) or 1.0)
        scores = vote((self.vectors @ query)[None, :], carries, k)[0]
        served = np.array([n >= min_examples for n in examples]) & (carries.sum(axis=0) > 0)
        thresholds = thresholds_on_memory(self.vectors, carries, served, k, target)
        return [OwnScore(name, round(float(score), 4), None if not np.isfinite(t) else float(t), n)
                for name, score, t, n in zip(candidates, scores, thresholds, examples, strict=True)]


def recall(session: Session, repository_id: int, version: str, *, exclude_issue: int | None = None
           ) -> OwnLabelMemory:
    """The repository's memory rows (core.memory, as `version` embedded them) with their own labels."""
    rows = session.execute(select(MemoryEntry.issue_id, MemoryEntry.embedding).where(
        MemoryEntry.repository_id == repository_id, MemoryEntry.model_version == version,
        MemoryEntry.issue_id != (exclude_issue or -1)).order_by(MemoryEntry.id)).all()
    carried: dict[int, set[str]] = {}
    for issue_id, label in session.execute(
            select(OwnLabelExample.issue_id, OwnLabelExample.label).join(
                IssueRecord, IssueRecord.id == OwnLabelExample.issue_id)
            .where(IssueRecord.repository_id == repository_id)):
        carried.setdefault(issue_id, set()).add(label)
    examples = Counter(label for issue_id, labels in carried.items() if issue_id != exclude_issue
                       for label in labels)
    if not rows:
        return OwnLabelMemory(np.zeros((0, 0), dtype=np.float32), [], dict(examples))
    vectors = np.stack([np.frombuffer(blob, dtype="<f4") for _, blob in rows])
    labels = [frozenset(carried.get(issue_id, ())) for issue_id, _ in rows]
    return OwnLabelMemory(vectors, labels, dict(examples))


def confirm(session: Session, issue: IssueRecord, label: str, actor: str | None) -> None:
    """A human (or the backfill, from the repository's history) confirmed `label` on the issue."""
    if session.scalar(select(OwnLabelExample.id).where(OwnLabelExample.issue_id == issue.id,
                                                       OwnLabelExample.label == label)) is None:
        session.add(OwnLabelExample(issue_id=issue.id, label=label, confirmed_by=actor))
        session.flush()


def unconfirm(session: Session, issue: IssueRecord, label: str) -> None:
    """A human took `label` off the issue: it is no example of it any more."""
    session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id,
                                                  OwnLabelExample.label == label))


def in_areas(label: str, areas: Sequence[str] | None) -> bool:
    """Whether the config's `areas` take `label`: None takes every candidate; an entry is a label's name,
    or a prefix when it ends in `:`, `/`, `-`, `_`, `.` or `*` (`module:`, `area-`, `area/*`)."""
    if areas is None:
        return True
    return any(label == area or (area[-1:] in ":/-_.*" and label.startswith(area.rstrip("*")))
               for area in areas)
