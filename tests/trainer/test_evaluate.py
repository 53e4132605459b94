"""Metrics on inputs small enough to check by hand, and a real evaluation of the baseline."""

import pytest

from trainer.dataset import Example
from trainer.evaluate import (
    UNREACHABLE,
    confusion_matrix,
    evaluate_classifier,
    macro_f1,
    mean_repo_macro_f1,
    per_label,
    per_repo,
    plot_confusion,
    precision_coverage,
    thresholds_for_precision,
)


def test_two_by_two_by_hand():
    truth = ["bug", "bug", "bug", "feature", "feature"]
    predicted = ["bug", "bug", "feature", "feature", "bug"]
    # bug: 2 hits, P 2/3, R 2/3 → F1 2/3; feature: 1 hit, P 1/2, R 1/2 → F1 1/2
    assert macro_f1(truth, predicted) == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert per_label(truth, predicted, ["bug", "feature"]) == {
        "bug": pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}),
        "feature": pytest.approx({"precision": 1 / 2, "recall": 1 / 2, "f1": 1 / 2, "support": 2})}
    assert confusion_matrix(truth, predicted, ["bug", "feature"]) == [[2, 1], [1, 1]]


def test_a_label_with_no_hit_scores_zero_as_in_the_lesson():
    assert macro_f1(["bug", "docs"], ["bug", "bug"], ["bug", "docs"]) == pytest.approx((2 / 3 + 0) / 2)
    assert macro_f1(["bug"], ["bug"], ["bug", "feature", "question", "docs"]) == 0.25


def test_nlbse_mean_uses_only_the_labels_present_in_each_repo():
    truth = ["bug", "feature", "bug", "bug"]
    predicted = ["bug", "feature", "bug", "question"]
    repos = ["a/a", "a/a", "b/b", "b/b"]
    # a/a: perfect on bug and feature → 1.0; b/b has only bug in its truth: P 1, R 1/2 → F1 2/3
    # ("question" was predicted there but is absent from b/b's truth, so it is not averaged in).
    assert per_repo(truth, predicted, repos) == {
        "a/a": {"macro_f1": 1.0, "n": 2, "labels": ["bug", "feature"]},
        "b/b": {"macro_f1": pytest.approx(2 / 3), "n": 2, "labels": ["bug"]}}
    assert mean_repo_macro_f1(truth, predicted, repos) == pytest.approx((1 + 2 / 3) / 2)
    assert list(per_repo(["bug"], ["bug"], [None])) == ["(none)"]


def test_thresholds_reach_the_target_precision_with_the_most_coverage():
    scores = [{"bug": 0.9, "feature": 0.1}, {"bug": 0.8, "feature": 0.2}, {"bug": 0.7, "feature": 0.3},
              {"bug": 0.6, "feature": 0.4}, {"bug": 0.2, "feature": 0.8}]
    truth = ["bug", "bug", "feature", "bug", "bug"]
    # bug predictions by score: 0.9 ✓, 0.8 ✓, 0.7 ✗, 0.6 ✓ → precision 1, 1, 2/3, 3/4
    assert thresholds_for_precision(scores, truth, 0.75) == {"bug": 0.6, "feature": UNREACHABLE}
    assert thresholds_for_precision(scores, truth, 1.0)["bug"] == 0.8
    table = precision_coverage(scores, truth, grid=(0.0, 0.75))
    assert table == [{"threshold": 0.0, "coverage": 1.0, "precision": 0.6},
                     {"threshold": 0.75, "coverage": 0.6, "precision": pytest.approx(2 / 3)}]


def test_tied_scores_are_kept_or_dropped_together():
    scores = [{"bug": 0.7, "x": 0.3}, {"bug": 0.7, "x": 0.3}, {"bug": 0.9, "x": 0.1}]
    assert thresholds_for_precision(scores, ["bug", "x", "bug"], 0.9) == {"bug": 0.9}


def test_confusion_png_is_written(tmp_path):
    path = plot_confusion([[5, 1], [2, 7]], ["bug", "feature"], tmp_path / "confusion.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rows_with_labels_the_model_does_not_know_are_counted_and_left_out(tfidf_model, small_heldout):
    extra = [Example("Improve the README", "typo", "docs", "a/b"),
             Example("Docs", "", "documentation", "a/b")]
    result = evaluate_classifier(tfidf_model.classifier(), small_heldout + extra, batch_size=8)
    assert (result["n_scored"], result["n_skipped"]) == (len(small_heldout), 2)
    assert result["skipped_labels"] == ["docs", "documentation"]
    keys = {"macro_f1", "mean_repo_macro_f1", "per_repo", "per_label", "confusion", "labels", "n_scored",
            "n_skipped", "issues_per_second", "thresholds"}
    assert keys <= result.keys()
    assert sum(map(sum, result["confusion"])) == len(small_heldout)
    assert set(result["per_repo"]) == {e.repo for e in small_heldout}


def test_evaluation_matches_the_metric_functions(tfidf_model, small_heldout):
    classifier = tfidf_model.classifier()
    result = evaluate_classifier(classifier, small_heldout)
    rows = classifier.predict([e.text for e in small_heldout])
    predicted = [max(row, key=row.get) for row in rows]
    truth = [e.label for e in small_heldout]
    assert result["macro_f1"] == pytest.approx(macro_f1(truth, predicted))
    assert result["mean_repo_macro_f1"] == pytest.approx(mean_repo_macro_f1(truth, predicted,
                                                                            [e.repo for e in small_heldout]))


def test_nothing_to_score_is_an_error(tfidf_model):
    with pytest.raises(ValueError, match="none of the 1 examples"):
        evaluate_classifier(tfidf_model.classifier(), [Example("a", "", "docs")])
