"""The TF-IDF baseline trains on real issues and is served by load_classifier like any model."""

import json

import pytest

from bot.classifier import MODEL_CARD, TfidfClassifier, load_classifier
from trainer.baseline import train_tfidf
from trainer.dataset import Example
from trainer.evaluate import evaluate_classifier


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
