"""The TF-IDF baseline trains on real issues and is served by load_classifier like any model."""

import dataclasses
import json

import pytest

from core.card import MODEL_CARD
from core.classifier import TfidfClassifier, load_classifier
from tests.trainer.conftest import balanced
from trainer.baseline import train_tfidf, train_tfidf_borrowing
from trainer.dataset import Example
from trainer.evaluate import evaluate_classifier, macro_f1, top_label


def test_baseline_beats_chance_on_unseen_issues(tfidf_model, nlbse_test):
    assert tfidf_model.labels == ["bug", "feature", "question"]
    result = evaluate_classifier(tfidf_model.classifier(), nlbse_test[::5])
    assert result["macro_f1"] > 0.5  # chance is 1/3 on three balanced classes


def test_saved_baseline_loads_with_the_same_predictions(tfidf_model, small_heldout, tmp_path):
    directory = tfidf_model.save(tmp_path / "tfidf", version="tfidf-1", thresholds={"bug": 0.6})
    loaded = load_classifier(directory)
    assert isinstance(loaded, TfidfClassifier)
    assert (loaded.version, loaded.labels) == ("tfidf-1", ["bug", "feature", "question"])
    texts = [e.text for e in small_heldout]
    assert loaded.predict(texts) == tfidf_model.classifier().predict(texts)
    card = json.loads((directory / MODEL_CARD).read_text())
    assert card["kind"] == "tfidf" and card["thresholds"] == {"bug": 0.6}


def test_one_label_is_not_enough():
    with pytest.raises(ValueError, match="at least two labels"):
        train_tfidf([Example("a", "", "bug"), Example("b", "", "bug")])


def test_weights_scale_how_much_each_issue_teaches(nlbse_train, small_heldout):
    """The per-repository recipe down-weights other repositories' issues; a weight must really count."""
    clean = balanced(nlbse_train, 10)
    mislabelled = [dataclasses.replace(e, label="bug")  # other issues, every one called a bug
                   for e in balanced(nlbse_train[::-1], 10) if e.label != "bug"]
    texts, truth = [e.text for e in small_heldout], [e.label for e in small_heldout]

    def fit(noise_weight: float):
        weights = [1.0] * len(clean) + [noise_weight] * len(mislabelled)
        model = train_tfidf(clean + mislabelled, weights=weights)
        return [top_label(row) for row in model.classifier().predict(texts)]

    trusted, discounted = fit(1.0), fit(0.01)
    assert trusted.count("bug") > discounted.count("bug")
    assert macro_f1(truth, discounted) > macro_f1(truth, trusted)


def test_weights_must_match_the_examples(small_train):
    with pytest.raises(ValueError, match="one per example"):
        train_tfidf(small_train, weights=[1.0])


def test_borrowing_takes_other_repositories_issues_of_known_labels_only(small_train):
    others = [Example("zyxwvut crashes on start", "", "bug", repo="octo/other"),
              Example("zyxwvut should export PDF", "", "feature", repo="octo/other"),
              Example("typo in the readme", "", "docs", repo="octo/other")]  # a label the repository lacks
    trained = train_tfidf_borrowing(small_train, others, weight=0.3, labels=["bug", "feature", "question"])
    assert trained.labels == ["bug", "feature", "question"]
    assert trained.borrowed == {"issues": 2, "weight": 0.3}  # what the model card records
    alone = train_tfidf_borrowing(small_train, [], weight=0.3, labels=["bug", "feature", "question"])
    assert alone.borrowed == {}


def test_a_saved_baseline_holds_no_pickle_and_scores_exactly_alike(tfidf_model, nlbse_test, tmp_path):
    import numpy as np

    directory = tfidf_model.save(tmp_path / "tfidf", version="tfidf-1")
    for path in directory.iterdir():  # JSON and .npy arrays only; the arrays open with allow_pickle=False
        assert path.suffix in {".json", ".npy"}, path
        if path.suffix == ".npy":
            assert np.load(path, allow_pickle=False).dtype != object
    texts = [e.text for e in nlbse_test[:300]] + ["", "💥 ünïcode  \t tabs", "x" * 5000]
    rebuilt = load_classifier(directory).pipeline
    assert np.array_equal(rebuilt.predict_proba(texts), tfidf_model.pipeline.predict_proba(texts))


def test_a_pickled_baseline_is_refused_until_the_operator_converts_it(tfidf_model, small_heldout, tmp_path):
    import joblib

    from core.classifier import PickledModel
    from trainer.baseline import convert_pickled

    directory = tfidf_model.save(tmp_path / "tfidf", version="old")
    for path in directory.glob("tfidf*"):
        path.unlink()
    joblib.dump(tfidf_model.pipeline, directory / "pipeline.joblib")  # what older versions wrote
    with pytest.raises(PickledModel, match="convert-tfidf"):
        load_classifier(directory)
    assert convert_pickled(tmp_path) == [directory]
    assert not (directory / "pipeline.joblib").exists()
    texts = [e.text for e in small_heldout]
    assert load_classifier(directory).predict(texts) == tfidf_model.classifier().predict(texts)


def test_a_stronger_regularisation_is_fitted_and_recorded_on_the_card(small_train, small_heldout, tmp_path):
    served, strong = train_tfidf(small_train), train_tfidf(small_train, c=0.05)
    texts = [e.text for e in small_heldout]
    # a smaller C shrinks the weights: the scores sit nearer to uniform
    spread = [max(max(row.values()) for row in model.classifier().predict(texts)) for model in (served, strong)]
    assert spread[1] < spread[0]
    card = json.loads((strong.save(tmp_path / "strong", version="t") / MODEL_CARD).read_text())
    assert "LogisticRegression C=0.05 balanced" in card["train_config"]["pipeline"]
