"""Inference: issue text → scores per class, from a saved model directory of any kind.

The `Classifier` protocol, the TF-IDF model, the blend of an encoder with it, and `load_classifier`, which
loads any of them; the encoder itself (PyTorch or its fast path) is `core.encoder`'s. Every loaded model
carries its card (`.card`), read once. torch and transformers are imported inside functions only: the web
process imports this module's names without paying for them, and a test asserts the request path never
loads torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from core.card import BLEND_MEMBERS, PIPELINE_FILE, ModelCard
from core.encoder import EncoderClassifier, load_encoder
from core.engines import Hardware
from core.tfidf_files import TFIDF_FILE, load_pipeline


class PickledModel(RuntimeError):
    """A TF-IDF model saved as a pickle by an older version: loading it would run whatever it holds."""


class Classifier(Protocol):
    version: str
    labels: list[str]
    card: ModelCard  # what it was registered with: thresholds, recipe, metrics

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        """One {class: probability} dict per text."""


class TfidfClassifier:
    """The TF-IDF + logistic-regression baseline, saved as data (core.tfidf_files); served like any model."""

    def __init__(self, pipeline, card: ModelCard):
        self.pipeline, self.card = pipeline, card
        self.version, self.labels = card.version, list(card.labels)

    @classmethod
    def from_directory(cls, directory: Path | str, card: ModelCard) -> TfidfClassifier:
        """The model saved in `directory`, whose card the caller has read (`load_classifier`)."""
        directory = Path(directory)
        if not (directory / TFIDF_FILE).is_file() and (directory / PIPELINE_FILE).is_file():
            raise PickledModel(f"{directory} holds a pickled TF-IDF model ({PIPELINE_FILE}), which runs code when "
                               "loaded: if you trust where it came from, convert it once with "
                               "`issue-sorter convert-tfidf`, or retrain")
        return cls(load_pipeline(directory), card)

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        classes = list(self.pipeline.classes_)
        return [dict(zip(classes, map(float, row), strict=True)) for row in self.pipeline.predict_proba(list(texts))]


def load_classifier(directory: Path | str, *, threads: int | None = None, engine: str = "auto",
                    hardware: Hardware | None = None) -> Classifier:
    """Load whatever kind of model a registry directory holds (an encoder by the fastest engine its gate
    allowed on this CPU, or `engine` when that one is allowed: core.encoder.load_encoder).

    `threads` caps the CPU threads an encoder's inference uses, `hardware` is the machine's (None: this
    one's; core.encoder.load_encoder).
    """
    directory = Path(directory)
    return classifier_from(directory, ModelCard.read(directory), threads=threads, engine=engine, hardware=hardware)


def classifier_from(directory: Path, card: ModelCard, *, threads: int | None = None,
                    engine: str = "auto", hardware: Hardware | None = None) -> Classifier:
    """`load_classifier` for a model whose card is in hand (a registered model carries it)."""
    if card.kind == "tfidf":
        return TfidfClassifier.from_directory(directory, card)
    if card.kind == "blend":
        encoder, tfidf = (load_classifier(directory / member, threads=threads, engine=engine, hardware=hardware)
                          for member in BLEND_MEMBERS)
        return BlendedClassifier(encoder, tfidf, card.tfidf_share, card=card)
    return load_encoder(directory, card, threads=threads, engine=engine, hardware=hardware)


def blend_scores(rows: Sequence[dict[str, float]], other_rows: Sequence[dict[str, float]],
                 other_share: float) -> list[dict[str, float]]:
    """(1 - other_share) × rows + other_share × other_rows, label by label (a missing label counts 0)."""
    if not 0.0 <= other_share <= 1.0:
        raise ValueError(f"a blend share must be between 0 and 1, got {other_share}")
    blended = []
    for row, other in zip(rows, other_rows, strict=True):
        labels = list(row) + [label for label in other if label not in row]
        blended.append({label: (1 - other_share) * row.get(label, 0.0) + other_share * other.get(label, 0.0)
                        for label in labels})
    return blended


class BlendedClassifier:
    """A fine-tuned encoder and the TF-IDF model trained on the same issues, served as one model.

    They make different mistakes: the encoder reads meaning, TF-IDF counts telling words and code tokens.
    """

    def __init__(self, encoder: EncoderClassifier, tfidf: Classifier, tfidf_share: float, *,
                 card: ModelCard | None = None):
        """`card`: the blend's own (version, and the thresholds its registration measured on the blend's
        scores); without one, a card naming both members and nothing more."""
        unknown = set(tfidf.labels) - set(encoder.labels)
        if unknown:
            raise ValueError(f"the TF-IDF model knows labels the encoder does not: {sorted(unknown)}; "
                             "train both on the same issues")
        self.encoder, self.tfidf, self.tfidf_share = encoder, tfidf, tfidf_share
        self.labels = list(encoder.labels)
        self.card = card or ModelCard(version=f"{encoder.version}+{tfidf.version}", labels=self.labels,
                                      kind="blend", extra={"tfidf_share": tfidf_share})
        self.version = self.card.version

    def predict(self, texts: Sequence[str], batch_size: int = 16) -> list[dict[str, float]]:
        return self._blend(texts, self.encoder.predict(texts, batch_size=batch_size))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The encoder member's embeddings (core.encoder.EncoderClassifier.embed)."""
        return self.encoder.embed(texts)

    def predict_and_embed(self, texts: Sequence[str]) -> tuple[list[dict[str, float]], list[list[float]]]:
        """The blended scores, and the encoder's embeddings from the same forward pass."""
        encoded, vectors = self.encoder.predict_and_embed(texts)
        return self._blend(texts, encoded), vectors

    def _blend(self, texts: Sequence[str], encoded: list[dict[str, float]]) -> list[dict[str, float]]:
        tfidf = [_spread(row, encoder_row) for row, encoder_row in zip(self.tfidf.predict(texts), encoded,
                                                                      strict=True)]
        return blend_scores(encoded, tfidf, self.tfidf_share)


def _spread(tfidf_row: dict[str, float], encoder_row: dict[str, float]) -> dict[str, float]:
    """TF-IDF's row over every label the encoder knows.

    A retrained model keeps labels its repository has not confirmed lately, so its TF-IDF never saw them;
    those keep the encoder's probability, and TF-IDF shares the rest of the mass among the labels it knows.
    """
    known_mass = sum(encoder_row[label] for label in tfidf_row)
    return {label: tfidf_row[label] * known_mass if label in tfidf_row else probability
            for label, probability in encoder_row.items()}
