"""Writing the model card (bot.classifier.MODEL_CARD) that makes a saved model describe itself."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from bot.classifier import MODEL_CARD


def write_card(directory: Path, *, version: str, labels: list[str], kind: str, base_model: str,
               max_length: int, thresholds: dict[str, float] | None, metrics: dict[str, Any] | None,
               data_fingerprint: str, train_config: dict[str, Any] | None, **extra: Any) -> Path:
    """Write the card; `bot.classifier.ModelCard.read` and `load_classifier` read it back.

    `extra` adds more top-level fields (e.g. `training`: seconds, steps and final loss).
    """
    card = {
        "version": version, "labels": list(labels), "kind": kind, "base_model": base_model,
        "max_length": max_length, "thresholds": thresholds or {},
        "train_config": train_config or {}, "data_fingerprint": data_fingerprint,
        "metrics": metrics or {}, "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
    } | extra
    path = Path(directory) / MODEL_CARD
    path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    return path


def read_card(directory: Path) -> dict[str, Any]:
    """The card as a plain dict, with a message naming the fix when there is none."""
    path = Path(directory) / MODEL_CARD
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no {MODEL_CARD}: save models with trainer.train.save "
                                "or trainer.baseline.save so they describe themselves")
    return json.loads(path.read_text())


def update_card(directory: Path, **fields: Any) -> dict[str, Any]:
    """Change some fields of an existing card (the registry renames copied models this way)."""
    card = read_card(directory) | {key: value for key, value in fields.items() if value is not None}
    (Path(directory) / MODEL_CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    return card
