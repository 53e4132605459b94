"""Inference: issue text → scores per class, from a saved model directory of any kind.

torch and transformers are imported inside functions only: the web process imports this module's
names without paying for them, and a test asserts the request path never loads torch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from core.card import BLEND_MEMBERS, PIPELINE_FILE, ModelCard
from core.issue_text import shorten_text
from core.tfidf_files import TFIDF_FILE, load_pipeline

log = logging.getLogger(__name__)


class PickledModel(RuntimeError):
    """A TF-IDF model saved as a pickle by an older version: loading it would run whatever it holds."""


class Classifier(Protocol):
    version: str
    labels: list[str]

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        """One {class: probability} dict per text."""


class EncoderClassifier:
    """What every way of running a fine-tuned encoder shares: the text cut as the model was trained on it,
    length-sorted batches, class probabilities and mean-pooled embeddings from one forward pass.

    Subclasses run one batch (`_forward`): PyTorch here, ONNX Runtime in `core.fast_path`.
    """

    engine = "pytorch"  # which way it runs, as the model card and the logs name it

    def __init__(self, tokenizer, card: ModelCard):
        self.tokenizer, self.card = tokenizer, card
        self.version, self.labels = card.version, list(card.labels)
        # serve the text cut the way the model was trained on it
        self.head_and_tail = card.train_config.get("truncation") == "head+tail"

    def predict(self, texts: Sequence[str], batch_size: int = 16) -> list[dict[str, float]]:
        return self.predict_and_embed(texts, batch_size)[0]

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> list[list[float]]:
        """One L2-normalised vector per text: the encoder's last hidden state, mean-pooled over its tokens."""
        return self._run(texts, batch_size, scores=False)[1]

    def predict_and_embed(self, texts: Sequence[str], batch_size: int = 16
                          ) -> tuple[list[dict[str, float]], list[list[float]]]:
        """predict() and embed() from one forward pass per batch."""
        return self._run(texts, batch_size, scores=True)

    def _run(self, texts: Sequence[str], batch_size: int, *, scores: bool
             ) -> tuple[list[dict[str, float]], list[list[float]]]:
        # Sorting by length makes batches nearly pad-free: 1.2-1.7x faster on CPU (STACK-NOTES).
        if self.head_and_tail:
            texts = [shorten_text(text, self.tokenizer, self.card.max_length) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        results: list[dict[str, float]] = [{} for _ in texts]
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            hidden, probabilities = self._forward([texts[i] for i in chunk], scores)
            for position, i in enumerate(chunk):
                vectors[i] = hidden[position]
                if scores:
                    results[i] = dict(zip(self.labels, probabilities[position], strict=True))
        return results, vectors

    def _encode(self, texts: list[str], tensors: str):
        return self.tokenizer(texts, truncation=True, padding=True, max_length=self.card.max_length,
                              return_tensors=tensors)

    def _forward(self, texts: list[str], scores: bool) -> tuple[list[list[float]], list[list[float]]]:
        """(mean-pooled, normalised last hidden states, class probabilities or []) of one batch."""
        raise NotImplementedError


class TransformerClassifier(EncoderClassifier):
    """A fine-tuned encoder with its tokenizer in PyTorch, on CPU (or CUDA when there is one)."""

    def __init__(self, model, tokenizer, card: ModelCard, device: str = "cpu"):
        super().__init__(tokenizer, card)
        self.model, self.device = model, device

    @classmethod
    def from_directory(cls, directory: Path | str, device: str | None = None) -> TransformerClassifier:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        directory = Path(directory)
        card = ModelCard.read(directory)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForSequenceClassification.from_pretrained(directory).to(device).eval()
        return cls(model, tokenizer, card, device)

    def _forward(self, texts: list[str], scores: bool) -> tuple[list[list[float]], list[list[float]]]:
        import torch

        with torch.inference_mode():
            encoded = self._encode(texts, "pt").to(self.device)
            if scores:
                output = self.model(**encoded, output_hidden_states=True)
                hidden, probabilities = output.hidden_states[-1], output.logits.float().softmax(-1).cpu().tolist()
            else:  # the encoder alone, without the classification head
                hidden, probabilities = self.model.base_model(**encoded).last_hidden_state, []
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            pooled = pooled.float()
            return pooled.div(pooled.norm(dim=-1, keepdim=True).clamp(min=1e-12)).cpu().tolist(), probabilities


class TfidfClassifier:
    """The TF-IDF + logistic-regression baseline, saved as data (core.tfidf_files); served like any model."""

    def __init__(self, pipeline, card: ModelCard):
        self.pipeline, self.card = pipeline, card
        self.version, self.labels = card.version, list(card.labels)

    @classmethod
    def from_directory(cls, directory: Path | str) -> TfidfClassifier:
        directory = Path(directory)
        if not (directory / TFIDF_FILE).is_file() and (directory / PIPELINE_FILE).is_file():
            raise PickledModel(f"{directory} holds a pickled TF-IDF model ({PIPELINE_FILE}), which runs code when "
                               "loaded: if you trust where it came from, convert it once with "
                               "`issue-sorter convert-tfidf`, or retrain")
        return cls(load_pipeline(directory), ModelCard.read(directory))

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        classes = list(self.pipeline.classes_)
        return [dict(zip(classes, map(float, row), strict=True)) for row in self.pipeline.predict_proba(list(texts))]


def load_classifier(directory: Path | str, *, threads: int | None = None) -> Classifier:
    """Load whatever kind of model a registry directory holds (an encoder by its fastest working path)."""
    directory = Path(directory)
    card = ModelCard.read(directory)
    if card.kind == "tfidf":
        return TfidfClassifier.from_directory(directory)
    if card.kind == "blend":
        encoder, tfidf = (load_classifier(directory / member, threads=threads) for member in BLEND_MEMBERS)
        return BlendedClassifier(encoder, tfidf, card.tfidf_share, version=card.version)
    return load_encoder(directory, card, threads=threads)


def load_encoder(directory: Path, card: ModelCard, *, threads: int | None = None) -> EncoderClassifier:
    """The fast path (core.fast_path) when its artefact is there, intact and passed the gate; else PyTorch.

    `threads` caps the CPU threads inference uses (a bot worker's ISSUE_SORTER_WORKER_THREADS); None: the
    engine's default.
    """
    from core import fast_path

    fast, reason = fast_path.load(directory, card, threads=threads)
    if fast is not None:
        log.info("serving %s with %s (%s)", card.version, fast.engine, fast.path)
        return fast
    log.warning("serving %s with PyTorch: %s", card.version, reason)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return TransformerClassifier.from_directory(directory)


def encoder_directory(directory: Path | str) -> Path:
    """Where a model's fine-tuned encoder lives: the directory itself, or a blend's encoder member."""
    directory = Path(directory)
    return directory / BLEND_MEMBERS[0] if ModelCard.read(directory).kind == "blend" else directory


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

    def __init__(self, encoder: EncoderClassifier, tfidf: Classifier, tfidf_share: float,
                 version: str | None = None):
        unknown = set(tfidf.labels) - set(encoder.labels)
        if unknown:
            raise ValueError(f"the TF-IDF model knows labels the encoder does not: {sorted(unknown)}; "
                             "train both on the same issues")
        self.encoder, self.tfidf, self.tfidf_share = encoder, tfidf, tfidf_share
        self.labels = list(encoder.labels)
        self.version = version or f"{encoder.version}+{tfidf.version}"

    def predict(self, texts: Sequence[str], batch_size: int = 16) -> list[dict[str, float]]:
        return self._blend(texts, self.encoder.predict(texts, batch_size=batch_size))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The encoder member's embeddings (TransformerClassifier.embed)."""
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
