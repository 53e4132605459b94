"""Per-kind thresholds that keep the labels a repository gets at a target precision, and the coverage and
precision any thresholds give. Pure: (served scores, confirmed kind) pairs in, plain data out.

The bot applies a kind when it is the top class and its score reaches the kind's threshold
(bot.labeling.decide.LabelingPolicy.threshold_for), so a kind's precision is measured on the issues it was the
top class of: of those at or above the threshold, the share whose confirmed kind it is. The lowest
threshold that reaches the target labels the most issues. A repository's own figure is trusted from
MIN_SUPPORT predictions of the kind on; below that the model's global threshold (its card, computed at
registration by trainer.evaluate) applies, and without one the App's threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_TARGET_PRECISION = 0.90  # a repository's target when its config says nothing
# A kind's predictions in the repository before its own threshold replaces the global one: with fewer, one
# wrong label moves the precision by more than the 10 points the default target leaves.
MIN_SUPPORT = 20
# The threshold of a kind whose precision reaches the target at no threshold, on enough of the repository's
# own issues: the bot abstains on it (and puts the abstention label on), as trainer.evaluate does globally.
UNREACHABLE = 1.0
OWN, GLOBAL, DEFAULT = "repository", "global", "default"  # where a kind's threshold came from


@dataclass(frozen=True)
class Judged:
    """One issue as the bot served it, against what a human said it is."""

    scores: Mapping[str, float]  # the served scores (memory-adjusted), one per class
    truth: str | None  # the class a human confirmed; None: the bot's label was rejected, nothing put instead

    @property
    def predicted(self) -> str:
        return max(self.scores, key=self.scores.__getitem__)

    @property
    def score(self) -> float:
        return float(self.scores[self.predicted])

    @property
    def correct(self) -> bool:
        return self.truth == self.predicted


@dataclass(frozen=True)
class KindThreshold:
    threshold: float
    source: str  # OWN | GLOBAL | DEFAULT
    support: int  # the repository's judged issues this kind was the top class of


@dataclass(frozen=True)
class Quality:
    """What thresholds do to judged issues: how many they label, and how many of those rightly."""

    judged: int
    labelled: int
    correct: int

    @property
    def coverage(self) -> float:
        return self.labelled / self.judged if self.judged else 0.0

    @property
    def precision(self) -> float | None:
        return self.correct / self.labelled if self.labelled else None


def lowest_threshold(scores: Sequence[float], correct: Sequence[bool], target: float, *,
                     local_precision: float = 0.0) -> float | None:
    """The lowest score t whose predictions at or above it (ties included) are right at least `target` of
    the time; None when no t is. With `local_precision`, the predictions scored about t must be right at
    least that often too (`local_precisions`): the precision above t can reach the target through a band of
    mostly wrong scores carried by many sure ones above it, and such a band is what a shift in the issues'
    mix spoils. The kinds' thresholds use no floor; the own labels' (core.own_labels) do."""
    if not 0 < target <= 1:
        raise ValueError(f"a target precision is between 0 and 1, not {target!r}")
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        return None
    order = np.argsort(-values, kind="stable")
    values, correct = values[order], np.asarray(correct, dtype=bool)[order]
    hits = np.cumsum(correct)
    kept = np.arange(1, values.size + 1)
    last_of_tie = np.append(values[1:] < values[:-1], True)  # "score >= t" keeps every tie of t
    reaches = last_of_tie & (hits >= target * kept - 1e-9)
    if local_precision:
        reaches &= local_precisions(values, correct) >= local_precision - 1e-9
    return float(values[reaches][-1]) if reaches.any() else None


def local_precisions(values: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """How often a prediction scored about each of `values` is right: the isotonic (monotone in the score)
    fit of `correct` on `values`."""
    from sklearn.isotonic import IsotonicRegression

    return IsotonicRegression(out_of_bounds="clip").fit(values, correct.astype(float)).predict(values)


def kind_thresholds(judged: Sequence[Judged], classes: Sequence[str], target: float,
                    global_thresholds: Mapping[str, float], default: float, *,
                    min_support: int = MIN_SUPPORT) -> dict[str, KindThreshold]:
    """Each class's threshold: the repository's own with at least `min_support` predictions of it, else the
    global one, else `default`."""
    by_kind: dict[str, list[Judged]] = {kind: [] for kind in classes}
    for row in judged:
        if row.predicted in by_kind:
            by_kind[row.predicted].append(row)
    result = {}
    for kind, rows in by_kind.items():
        if len(rows) >= min_support:
            own = lowest_threshold([r.score for r in rows], [r.correct for r in rows], target)
            result[kind] = KindThreshold(UNREACHABLE if own is None else own, OWN, len(rows))
        elif kind in global_thresholds:
            result[kind] = KindThreshold(float(global_thresholds[kind]), GLOBAL, len(rows))
        else:
            result[kind] = KindThreshold(float(default), DEFAULT, len(rows))
    return result


def quality_at(judged: Sequence[Judged], thresholds: Mapping[str, float], default: float) -> Quality:
    """Coverage and precision on `judged` when each kind is applied from its threshold on (`default` for a
    kind without one)."""
    labelled = [row for row in judged if row.score >= thresholds.get(row.predicted, default)]
    return Quality(len(judged), len(labelled), sum(row.correct for row in labelled))
