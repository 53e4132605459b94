"""Per-kind thresholds for a target precision (core.thresholds): the rule on small fixtures, then a
repository whose model is calibrated unlike the global evaluation, where its own thresholds keep the
precision of its later labels that the global ones lose."""

import random

import numpy as np
import pytest

from core.thresholds import (
    DEFAULT,
    GLOBAL,
    OWN,
    UNREACHABLE,
    Judged,
    kind_thresholds,
    local_precisions,
    lowest_threshold,
    quality_at,
)

CLASSES = ("bug", "feature", "question")


def judged(kind: str, score: float, truth: str | None) -> Judged:
    rest = (1 - score) / (len(CLASSES) - 1)
    return Judged({c: score if c == kind else rest for c in CLASSES}, truth)


def test_the_lowest_threshold_that_reaches_the_target_wins_even_past_a_dip():
    scores = [0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4]
    correct = [True, True, False, True, True, True, False, False]
    # precision from the top: 1, 1, .67, .75, .8, .83, .71, .62: it dips below 0.8 at 0.85 and recovers
    assert lowest_threshold(scores, correct, 0.8) == 0.6
    assert lowest_threshold(scores, correct, 0.9) == 0.9
    assert lowest_threshold(scores[::-1], correct[::-1], 0.8) == 0.6  # the order does not matter


def test_ties_are_kept_or_dropped_together_and_exact_targets_count():
    assert lowest_threshold([0.9, 0.7, 0.7], [True, True, False], 0.9) == 0.9  # at 0.7: 2 of 3
    assert lowest_threshold([0.9] * 9 + [0.5], [True] * 9 + [False], 0.9) == 0.5  # 9 of 10 is 0.9
    assert lowest_threshold([0.9, 0.8], [False, True], 0.9) is None
    assert lowest_threshold([], [], 0.9) is None
    with pytest.raises(ValueError, match="between 0 and 1"):
        lowest_threshold([0.5], [True], 1.5)


BAND = np.round(np.linspace(0.95, 0.05, 26), 3)  # twenty sure rows, then a band right one time in three
BAND_RIGHT = np.array([1] * 20 + [0, 0, 1, 0, 0, 1], dtype=bool)


def test_with_a_local_floor_a_threshold_never_sits_in_a_band_of_scores_that_is_mostly_wrong():
    """The rows above a threshold deep in the band are still right at 0.85 (from 0.122: 21 of 24), but a
    prediction scored in the band is wrong two times in three: the floor keeps the threshold on the last
    sure row (the own labels' rule), without it the precision above buys the band (the kinds' rule)."""
    assert lowest_threshold(BAND, BAND_RIGHT, 0.85, local_precision=0.5) == pytest.approx(0.266)
    assert local_precisions(BAND, BAND_RIGHT)[20:] == pytest.approx([1 / 3] * 6)
    assert lowest_threshold(BAND, BAND_RIGHT, 0.85) == pytest.approx(0.122)  # 21 right of 24: 0.875


def test_a_local_floor_changes_nothing_where_no_band_is_mostly_wrong():
    scores, right = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [True, True, True, False, True, False]
    for target, expected in ((0.8, 0.5), (0.85, 0.7)):  # 4 right of 5 from 0.5 up; at 0.6: 3 of 4
        assert lowest_threshold(scores, right, target, local_precision=0.5) == lowest_threshold(
            scores, right, target) == expected
    assert lowest_threshold(scores, [False] * 6, 0.85, local_precision=0.5) is None


def test_a_kind_uses_its_own_threshold_from_min_support_on_else_the_global_one_else_the_default():
    rows = ([judged("bug", 0.6, "bug")] * 19 + [judged("bug", 0.9, "bug")]  # 20 bug predictions, all right
            + [judged("feature", 0.9, "question")] * 19  # 19: one short of trusting the repository
            + [judged("question", 0.9, "bug"), judged("question", 0.8, None)] * 10)  # 20, every one wrong
    thresholds = kind_thresholds(rows, CLASSES, 0.9, {"feature": 0.7, "bug": 0.99}, 0.5, min_support=20)
    assert thresholds["bug"].threshold == 0.6 and thresholds["bug"].source == OWN
    assert thresholds["bug"].support == 20
    assert (thresholds["feature"].threshold, thresholds["feature"].source) == (0.7, GLOBAL)
    assert (thresholds["question"].threshold, thresholds["question"].source) == (UNREACHABLE, OWN)
    assert kind_thresholds([], CLASSES, 0.9, {}, 0.5)["bug"].source == DEFAULT


def test_coverage_and_precision_count_each_kind_at_its_own_threshold():
    rows = [judged("bug", 0.9, "bug"), judged("bug", 0.6, "feature"), judged("feature", 0.6, "feature"),
            judged("question", 0.55, None)]
    quality = quality_at(rows, {"bug": 0.8, "feature": 0.5}, default=0.5)  # question at the default
    assert (quality.judged, quality.labelled, quality.correct) == (4, 3, 2)
    assert quality.coverage == 0.75 and quality.precision == pytest.approx(2 / 3)
    assert quality_at(rows, {}, default=0.95).precision is None


# ---- a repository unlike the global evaluation -------------------------------------------------------

# P(right | top score) in this repository: bug predictions are right even at modest scores, questions only
# near the top (its "questions" are mostly bug reports); the global thresholds say the opposite.
RIGHT = {"bug": lambda s: 0.93 + 0.07 * s, "feature": lambda s: s, "question": lambda s: s ** 3}
GLOBAL_THRESHOLDS = {"bug": 0.85, "feature": 0.8, "question": 0.6}


def repository_stream(n: int, seed: int) -> list[Judged]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        kind, score = rng.choice(CLASSES), rng.uniform(0.4, 1.0)
        others = [c for c in CLASSES if c != kind]
        rows.append(judged(kind, score, kind if rng.random() < RIGHT[kind](score) else rng.choice(others)))
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_thresholds_from_a_repositorys_history_keep_the_precision_of_its_later_labels(seed):
    history, later = repository_stream(150, seed), repository_stream(3000, seed + 100)
    own = kind_thresholds(history, CLASSES, 0.9, GLOBAL_THRESHOLDS, 0.5, min_support=20)
    assert {row.source for row in own.values()} == {OWN}
    at_own = quality_at(later, {kind: row.threshold for kind, row in own.items()}, 0.5)
    at_global = quality_at(later, GLOBAL_THRESHOLDS, 0.5)
    assert at_own.precision >= 0.88  # the target, less what 150 issues of history can promise
    assert at_global.precision < 0.85  # the global thresholds let the repository's bad questions through
    assert at_own.coverage > at_global.coverage  # and its own labels more of its issues, not fewer
