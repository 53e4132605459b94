"""The rule that applies a repository's own labels (core.own_labels.heads): each label's head, its threshold
cross-fitted on the memory, and labels the maintainers stopped using."""

import dataclasses

import numpy as np
import pytest

from core.own_labels import OwnLabelMemory, OwnLabelParams
from core.own_labels.heads import cross_fitted, fit_rules, stopped_using, threshold_at

SERVED = OwnLabelParams()


def separable_memory(rng, *, carried: int, rows: int, dimensions: int = 16) -> OwnLabelMemory:
    """`carried` rows about one topic (around a direction of their own) carry `streaming`; the rest don't."""
    topic = np.zeros(dimensions)
    topic[0] = 1.0
    vectors = rng.normal(size=(rows, dimensions)) * 0.25
    vectors[:carried] += topic
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = [frozenset({"streaming"})] * carried + [frozenset()] * (rows - carried)
    texts = [ABOUT] * carried + [OTHER] * (rows - carried)  # the words the heads read beside the embedding
    order = rng.permutation(rows)  # in time order the label's issues come now and then, to the newest
    return OwnLabelMemory(vectors[order].astype(np.float32), [labels[i] for i in order], {"streaming": carried},
                          texts=[texts[i] for i in order])


ABOUT, OTHER = "the stream stops while reading", "a question about something else"


@pytest.mark.parametrize("carried,rows", [(30, 300), (500, 2000)])
def test_a_served_label_is_applied_near_its_examples_and_not_elsewhere(carried, rows):
    """The same rule for a label with 30 confirmed examples and one with 500: an issue about its topic
    scores above the threshold fitted on the memory, an issue about nothing below."""
    rng = np.random.default_rng(3)
    memory = separable_memory(rng, carried=carried, rows=rows)
    rules = fit_rules(memory, min_examples=20, target=0.85)
    near, far = np.eye(16)[0], np.eye(16)[5]
    (about,), (other,) = (rules.score(near, ["streaming"], memory, text=ABOUT),
                          rules.score(far, ["streaming"], memory, text=OTHER))
    assert rules.words is not None and rules.params == SERVED
    assert about.threshold is not None and about.examples == carried
    assert about.score >= about.threshold > other.score


def test_below_min_examples_a_label_has_no_threshold_and_is_scored_by_its_vote_alone():
    rng = np.random.default_rng(3)
    memory = separable_memory(rng, carried=30, rows=300)
    rules = fit_rules(memory, min_examples=31, target=0.85)
    (scored,) = rules.score(np.eye(16)[0], ["streaming"], memory)
    assert scored.threshold is None and rules.heads == {}
    assert scored.score == round(float(memory.votes(np.eye(16)[0], ["streaming"], SERVED.neighbours)[0]), 4) > 0.5


def test_a_threshold_is_chosen_on_scores_of_rows_fitted_without_them():
    """A label that has nothing to do with the text: a head fitted on all rows scores its own rows high
    (in-sample AUC about 0.9 here) and would set a threshold it cannot keep on new issues; each row scored
    by a head fitted without it ranks no better than chance, and the label gets no threshold."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(120, 64))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    carried = rng.random(120) < 0.3
    assert roc_auc_score(carried, cross_fitted(vectors, carried)) < 0.6
    memory = OwnLabelMemory(vectors.astype(np.float32), [frozenset({"vision"}) if c else frozenset() for c in carried],
                            {"vision": int(carried.sum())}, texts=[OTHER] * 120)  # words that say nothing
    rules = fit_rules(memory, min_examples=20, target=0.85)
    assert rules.thresholds == {"vision": np.inf}
    assert all(s.threshold is None for v in rng.normal(size=(50, 64))
               for s in rules.score(v, ["vision"], memory, text=OTHER))


def test_heads_of_words_are_fitted_only_on_the_memory_with_its_texts_and_score_only_with_the_issues():
    memory = separable_memory(np.random.default_rng(3), carried=30, rows=300)
    with pytest.raises(ValueError, match="with_texts"):
        fit_rules(dataclasses.replace(memory, texts=None), min_examples=20, target=0.85)
    with pytest.raises(ValueError, match="text="):
        fit_rules(memory, min_examples=20, target=0.85).score(np.eye(16)[0], ["streaming"], memory)


def test_no_label_is_served_that_no_memory_row_carries():
    memory = OwnLabelMemory(np.eye(4, dtype=np.float32), [frozenset()] * 4, {"streaming": 25})
    (scored,) = fit_rules(memory, min_examples=20, target=0.85).score(np.eye(4)[0], ["streaming"], memory)
    assert scored.threshold is None and scored.score == 0.0


def test_a_threshold_keeps_the_target_precision_among_the_rows_above_it():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    carried = np.array([1, 1, 1, 0, 1, 0], dtype=bool)
    assert threshold_at(scores, carried, 0.8, SERVED.local_precision) == 0.5  # 4 right of 5 from 0.5 up
    assert threshold_at(scores, carried, 0.85, SERVED.local_precision) == 0.7  # 0.6 would be 3 of 4
    assert threshold_at(scores, np.zeros(6, dtype=bool), 0.85, SERVED.local_precision) == np.inf
    assert threshold_at(np.zeros(6), np.ones(6, dtype=bool), 0.85, SERVED.local_precision) == 1e-9  # 0 never applies


def test_a_served_threshold_never_sits_in_a_band_of_scores_that_is_mostly_wrong():
    """Twenty sure rows, then a band where one row in three carries the label: the rows above a threshold
    deep in the band are still right at 0.85, but an issue scored in the band is wrong two times in three
    (core.thresholds' local floor, which the own labels' rule serves with)."""
    scores = np.round(np.linspace(0.95, 0.05, 26), 3)
    carried = np.array([1] * 20 + [0, 0, 1, 0, 0, 1], dtype=bool)
    assert threshold_at(scores, carried, 0.85, SERVED.local_precision) == pytest.approx(0.266)  # the last sure row


def test_a_label_the_maintainers_stopped_using_is_no_longer_applied_but_still_suggested():
    """`streaming` on one issue in ten, then on none of the newest 100 (its share would have put 5 there
    by row 50): the rule that kept it at 0.85 on the old rows no longer applies it, the vote still shows it."""
    memory = separable_memory(np.random.default_rng(3), carried=30, rows=300)
    assert np.isfinite(fit_rules(memory, min_examples=20, target=0.85).thresholds["streaming"])
    later = np.random.default_rng(4).normal(size=(100, 16)) * 0.25 + np.eye(16)[5]
    moved = OwnLabelMemory(np.vstack([memory.vectors, later / np.linalg.norm(later, axis=1, keepdims=True)]
                                     ).astype(np.float32), memory.labels + [frozenset()] * 100,
                           {"streaming": 30}, texts=memory.texts + [OTHER] * 100)
    assert stopped_using(moved.carries(["streaming"])[:, 0], SERVED.stopped_expected)
    rules = fit_rules(moved, min_examples=20, target=0.85)
    (about,) = rules.score(np.eye(16)[0], ["streaming"], moved, text=ABOUT)
    assert rules.thresholds["streaming"] == np.inf and about.threshold is None and about.score > 0.5
    kept = fit_rules(moved, min_examples=20, target=0.85, params=OwnLabelParams(stopped_expected=None))
    assert np.isfinite(kept.thresholds["streaming"])  # with the knob off, the old rows still set one


@pytest.mark.parametrize("newest_without,stopped", [(0, False), (49, False), (50, True), (300, True)])
def test_a_label_has_stopped_once_its_share_would_have_put_five_among_the_newest_rows_without_it(
        newest_without, stopped):
    """40 of 400 rows carry it, a share of 1 in 10: 5 expected among the newest 50."""
    carried = np.zeros(400, dtype=bool)
    carried[np.linspace(0, 399 - newest_without, 40).astype(int)] = True
    assert stopped_using(carried, 5.0) is stopped
    assert not stopped_using(carried, None) and not stopped_using(np.zeros(9, bool), 5.0)
