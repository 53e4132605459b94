"""The words of a repository's issues as features of its own labels' heads, beside the embedding: a TF-IDF
vocabulary fitted on the memory's texts where the rules are fitted (the feedback queue), stored with them as
data (terms and idf, JSON: core.own_labels.storage), and applied to each new issue's text by the labelling
job without fitting anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# sublinear counts, words and pairs seen in two issues or more (what bench.own_labels measured)
TFIDF = {"sublinear_tf": True, "min_df": 2, "max_features": 20000, "ngram_range": (1, 2)}


@dataclass(frozen=True)
class WordFeatures:
    """A fitted TF-IDF vocabulary: `terms` in column order, their idf (float64)."""

    terms: tuple[str, ...]
    idf: np.ndarray

    @classmethod
    def fit(cls, texts: Sequence[str]) -> WordFeatures | None:
        """The vocabulary of `texts`; None where they share no word (too few or empty texts)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        try:
            vectorizer = TfidfVectorizer(**TFIDF).fit(list(texts))
        except ValueError:  # "empty vocabulary": nothing seen twice
            return None
        terms = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.get)
        return cls(tuple(terms), np.asarray(vectorizer.idf_, dtype=np.float64))

    def transform(self, texts: Sequence[str]):
        """(texts, terms) sparse TF-IDF rows, as the fitted vectorizer computes them."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(sublinear_tf=TFIDF["sublinear_tf"], ngram_range=TFIDF["ngram_range"],
                                     vocabulary={term: i for i, term in enumerate(self.terms)}, dtype=np.float64)
        vectorizer.idf_ = self.idf
        return vectorizer.transform(list(texts))

    def features(self, vectors: np.ndarray, texts: Sequence[str]):
        """The heads' input: each row's embedding, then its TF-IDF (sparse CSR)."""
        from scipy.sparse import csr_matrix, hstack

        return hstack([csr_matrix(np.asarray(vectors, dtype=np.float64)), self.transform(texts)]).tocsr()

    def to_json(self) -> dict:
        return {"terms": list(self.terms), "idf": [float(value) for value in self.idf]}

    @classmethod
    def from_json(cls, stored: Mapping) -> WordFeatures:
        if len(stored["terms"]) != len(stored["idf"]):
            raise ValueError(f"stored own-label words: {len(stored['terms'])} terms, {len(stored['idf'])} idf")
        return cls(tuple(stored["terms"]), np.asarray(stored["idf"], dtype=np.float64))
