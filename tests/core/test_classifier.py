"""The blend of an encoder and TF-IDF as it serves: each side's share of every label's probability."""

import pytest

from core.classifier import BlendedClassifier, blend_scores


class FixedScores:
    """A classifier that answers the same scores for every text."""

    def __init__(self, row, labels=("bug", "feature", "question"), version="fixed"):
        self.row, self.labels, self.version = row, list(labels), version

    def predict(self, texts, batch_size=16):
        return [dict(self.row) for _ in texts]


def test_blend_weighs_each_side():
    blended = blend_scores([{"bug": 1.0, "feature": 0.0}], [{"bug": 0.0, "feature": 1.0}], 0.7)
    assert blended == [pytest.approx({"bug": 0.3, "feature": 0.7})]


def test_a_share_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        blend_scores([{"bug": 1.0}], [{"bug": 1.0}], 1.5)


def test_blended_classifier_serves_like_any_classifier():
    blended = BlendedClassifier(FixedScores({"bug": 1.0, "feature": 0.0, "question": 0.0}, version="enc"),
                                FixedScores({"bug": 0.0, "feature": 0.5, "question": 0.5}, version="tfidf"),
                                tfidf_share=0.6)
    assert blended.labels == ["bug", "feature", "question"] and blended.version == "enc+tfidf"
    assert blended.predict(["a", "b"]) == [pytest.approx({"bug": 0.4, "feature": 0.3, "question": 0.3})] * 2


def test_a_tfidf_model_with_labels_the_encoder_lacks_cannot_be_blended():
    with pytest.raises(ValueError, match="knows labels the encoder does not"):
        BlendedClassifier(FixedScores({"bug": 1.0}, labels=["bug"]), FixedScores({"bug": 1.0}), 0.5)


def test_a_label_the_tfidf_model_never_saw_keeps_the_encoders_probability():
    # retraining keeps kinds a repository has not confirmed lately: its TF-IDF knows only bug and feature
    encoder = FixedScores({"bug": 0.2, "feature": 0.2, "question": 0.6})
    tfidf = FixedScores({"bug": 0.25, "feature": 0.75}, labels=["bug", "feature"])
    blended = BlendedClassifier(encoder, tfidf, tfidf_share=0.5).predict(["x"])[0]
    # TF-IDF spreads the encoder's 0.4 on the labels it knows: bug 0.1, feature 0.3, question 0.6
    assert blended == pytest.approx({"bug": 0.15, "feature": 0.25, "question": 0.6})
    assert sum(blended.values()) == pytest.approx(1.0)
