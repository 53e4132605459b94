"""The memory's confirmed issues with the own labels each carries, and their vote: each label's
similarity-weighted share among an issue's nearest confirmed issues. A label no head serves yet (fewer
examples than the config's min_examples, or no threshold that keeps the target) is scored by it: suggested
on the review page from core.own_labels.heads.SUGGEST_SCORE on, never applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from core.memory import normalised


def vote(similarities: np.ndarray, carries: np.ndarray, k: int) -> np.ndarray:
    """(rows, labels) scores: for each row of `similarities` (rows × memory), the similarity-weighted share
    of its k nearest memory rows that carry each label (`carries`: memory × labels, 0/1)."""
    k = min(k, similarities.shape[1])
    nearest = np.argpartition(-similarities, k - 1, axis=1)[:, :k]
    weights = np.clip(np.take_along_axis(similarities, nearest, axis=1), 0, None)  # (rows, k)
    votes = np.einsum("rk,rkl->rl", weights, carries[nearest])
    return votes / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)


@dataclass(frozen=True)
class OwnLabelMemory:
    """A repository's confirmed issues as one model version embedded them, and the own labels they carry."""

    vectors: np.ndarray  # (n, d) float32, rows L2-normalised (core.memory's rows)
    labels: list[frozenset[str]]  # the own labels a human confirmed on each row's issue
    examples: dict[str, int] = field(default_factory=dict)  # label → confirmed examples in the repository
    issue_ids: list[int] = field(default_factory=list)  # each row's issue (core.tables.IssueRecord.id)
    texts: list[str] | None = None  # each row's issue text, read only where rules are fitted (storage.with_texts)

    def __len__(self) -> int:
        return len(self.labels)

    def carries(self, names: Sequence[str]) -> np.ndarray:
        """(rows, names) 0/1: which row carries which label."""
        return np.array([[name in row for name in names] for row in self.labels], dtype=np.float32
                        ).reshape(len(self), len(names))

    def votes(self, vector: Sequence[float], names: Sequence[str], k: int) -> np.ndarray:
        """Each of `names`' vote among the k nearest rows to the issue embedded as `vector` (0 for an empty
        memory)."""
        if not len(self) or not names:
            return np.zeros(len(names))
        return vote((self.vectors @ normalised(vector))[None, :], self.carries(names), k)[0]
