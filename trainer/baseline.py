"""The TF-IDF + logistic-regression baseline: seconds to train, and the bar every encoder must clear."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.card import PIPELINE_FILE, ModelCard, write_card
from core.tfidf_files import TFIDF_FILE, load_pipeline, save_pipeline
from trainer.dataset import Example

BASE_MODEL = "tfidf-logreg"  # recorded as the base model of baseline versions


@dataclass
class TrainedBaseline:
    """A fitted sklearn Pipeline (raw text in, class probabilities out) and its labels."""

    pipeline: Any
    labels: list[str]
    seconds: float
    base_model: str = BASE_MODEL
    borrowed: dict[str, float] = field(default_factory=dict)  # issues of other repositories and their weight

    def save(self, directory: Path | str, *, version: str, metrics: dict | None = None,
             thresholds: dict[str, float] | None = None, data_fingerprint: str = "") -> Path:
        """Write the pipeline as data (core.tfidf_files: JSON and .npy, no pickle) and a card with kind="tfidf"."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_pipeline(self.pipeline, directory)
        c = float(getattr(self.pipeline.named_steps.get("classifier"), "C", TFIDF_C))  # the fitted one
        write_card(directory, version=version, labels=self.labels, kind="tfidf", base_model=self.base_model,
                   max_length=0, thresholds=thresholds, metrics=metrics, data_fingerprint=data_fingerprint,
                   train_config={"pipeline": f"tfidf word1-2 + char_wb2-5, LogisticRegression C={c:g} balanced",
                                 **({"other_repositories": self.borrowed} if self.borrowed else {})},
                   training={"seconds": round(self.seconds, 2)})
        return directory

    def classifier(self, version: str = "unregistered"):
        """This baseline as a `core.classifier.TfidfClassifier`, without saving it first."""
        from core.classifier import TfidfClassifier

        return TfidfClassifier(self.pipeline, ModelCard(version=version, labels=self.labels, kind="tfidf",
                                                        base_model=self.base_model))


TFIDF_C = 4.0  # LogisticRegression's inverse regularisation: chosen on NLBSE'24; 0.5–16 within 0.01 unseen


def make_pipeline(seed: int = 42, min_df: int = 2, c: float = TFIDF_C):
    """Word 1–2-grams and character 2–5-grams (robust to code, paths and typos), then LogisticRegression."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion, Pipeline

    features = FeatureUnion([
        ("words", TfidfVectorizer(ngram_range=(1, 2), min_df=min_df, max_features=100_000,
                                  sublinear_tf=True)),
        ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=min_df, max_features=100_000,
                                  sublinear_tf=True)),
    ])
    # balanced weights: a repository's own labels are rarely balanced, and macro-F1 weighs each the same
    classifier = LogisticRegression(max_iter=2000, C=c, class_weight="balanced", random_state=seed)
    return Pipeline([("features", features), ("classifier", classifier)])


def train_tfidf(examples: Sequence[Example], *, seed: int = 42, weights: Sequence[float] | None = None,
                c: float = TFIDF_C) -> TrainedBaseline:
    """Fit the baseline on the examples' texts; `weights`, one per example, scale each one's say;
    `c`, LogisticRegression's C (benchmarks sweep it)."""
    labels = sorted({example.label for example in examples})
    if len(labels) < 2:
        raise ValueError(f"need at least two labels to train the baseline, got {labels}")
    if weights is not None and len(weights) != len(examples):
        raise ValueError(f"got {len(weights)} weights for {len(examples)} examples; give one per example")
    started = time.perf_counter()
    min_df = 2 if len(examples) >= 50 else 1  # a tiny set would have no n-gram seen twice
    pipeline = make_pipeline(seed, min_df, c).fit([example.text for example in examples],
                                               [example.label for example in examples],
                                               classifier__sample_weight=weights)
    seconds = time.perf_counter() - started
    return TrainedBaseline(pipeline, [str(label) for label in pipeline.classes_], seconds)


def train_tfidf_borrowing(own: Sequence[Example], others: Sequence[Example], *, weight: float,
                          labels: Sequence[str], seed: int = 42) -> TrainedBaseline:
    """Fit on a repository's own issues and other repositories', each of those counting `weight` of one.

    Other repositories' issues of a label outside `labels` are left out; the model card records how
    many were borrowed, and their weight.
    """
    borrowed = [example for example in others if example.label in labels]
    weights = [1.0] * len(own) + [weight] * len(borrowed) if borrowed else None
    trained = train_tfidf([*own, *borrowed], seed=seed, weights=weights)
    if borrowed:
        trained.borrowed = {"issues": len(borrowed), "weight": weight}
    return trained


def convert_pickled(directory: Path) -> list[Path]:
    """Rewrite every pickled TF-IDF model under `directory` as data and delete the pickle; returns where.

    This loads the pickles, so it runs what they hold: only for models whose origin you trust (the
    operator's `issue-sorter convert-tfidf`). The rebuilt model must score probe texts exactly alike.
    """
    import joblib
    import numpy as np

    converted = []
    for pickled in sorted(Path(directory).rglob(PIPELINE_FILE)):
        pipeline = joblib.load(pickled)
        save_pipeline(pipeline, pickled.parent)
        probes = ["Crash on start: Traceback (most recent call last)", "Please add dark mode", "How do I?", ""]
        if not np.array_equal(pipeline.predict_proba(probes), load_pipeline(pickled.parent).predict_proba(probes)):
            (pickled.parent / TFIDF_FILE).unlink()
            raise ValueError(f"{pickled} did not convert to the same scores: kept as it is")
        pickled.unlink()
        converted.append(pickled.parent)
    return converted
