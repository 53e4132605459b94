"""The own labels' words (core.own_labels.words): a TF-IDF vocabulary stored as data scores a new text
exactly as the vectorizer it was fitted as, so the labelling job never fits one."""

import json

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from core.own_labels.words import TFIDF, WordFeatures

TEXTS = ["Streaming stops with an error", "the stream crashes on resume", "Vision model: image fails to load",
         "image loading fails in the vision viewer", "hello world", "streaming and images"] * 2


def test_stored_words_transform_as_the_fitted_vectorizer():
    words = WordFeatures.fit(TEXTS)
    stored = WordFeatures.from_json(json.loads(json.dumps(words.to_json())))
    fitted = TfidfVectorizer(**TFIDF).fit(TEXTS)
    new = ["a stream of images fails", "nothing in the vocabulary here", ""]
    assert np.array_equal(stored.transform(new).toarray(), fitted.transform(new).toarray())
    assert stored.features(np.ones((3, 4)), new).shape == (3, 4 + len(fitted.vocabulary_))


def test_texts_that_share_no_word_give_no_vocabulary():
    assert WordFeatures.fit(["alpha", "beta"]) is None


def test_a_stored_vocabulary_that_does_not_match_its_idf_is_refused():
    with pytest.raises(ValueError, match="2 terms, 1 idf"):
        WordFeatures.from_json({"terms": ["a", "b"], "idf": [1.0]})
