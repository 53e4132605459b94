"""Choose an encoder: fine-tune each candidate, score it beside the TF-IDF baseline on held-out projects."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.tables import GLOBAL_SCOPE, ModelVersion
from trainer.baseline import BASE_MODEL as BASELINE
from trainer.baseline import train_tfidf
from trainer.config import TrainConfig
from trainer.dataset import Example, data_fingerprint
from trainer.evaluate import evaluate_classifier
from trainer.registry import Registry
from trainer.train import fine_tune

log = logging.getLogger(__name__)


@dataclass
class Selection:
    """The comparison table (one row per candidate, the baseline included) and the winner."""

    rows: list[dict[str, Any]]
    best: dict[str, Any]
    registered: ModelVersion | None = None  # the winner's registry row, when a registry was given


def select_encoder(candidates: Sequence[str], train_examples: Sequence[Example],
                   heldout_examples: Sequence[Example], config: TrainConfig, *,
                   registry: Registry | None = None, scope: str = GLOBAL_SCOPE,
                   progress: bool = False) -> Selection:
    """Fine-tune each candidate (hub id or directory) with `config`; the best macro-F1 on the held-out
    examples wins, the baseline included (an encoder that cannot beat TF-IDF is not worth serving)."""
    rows, best_model, best_row = [], None, None
    contenders = [(BASELINE, None)]
    contenders += [(name, dataclasses.replace(config, base_model=name)) for name in candidates]
    for name, candidate_config in contenders:
        trained = (train_tfidf(train_examples, seed=config.seed) if candidate_config is None
                   else fine_tune(candidate_config, train_examples, progress=progress))
        metrics = evaluate_classifier(trained.classifier(), heldout_examples)
        row = {"candidate": name, "kind": "tfidf" if candidate_config is None else "transformer",
               "macro_f1": metrics["macro_f1"], "mean_repo_macro_f1": metrics["mean_repo_macro_f1"],
               "train_seconds": trained.seconds, "issues_per_second": metrics["issues_per_second"],
               "metrics": metrics}
        rows.append(row)
        log.info("%s: macro-F1 %.4f", name, row["macro_f1"])
        if best_row is None or row["macro_f1"] > best_row["macro_f1"]:
            best_model, best_row = trained, row  # keep only the winner in memory
    selection = Selection(rows, best_row)
    if registry is not None:
        selection.registered = registry.register(best_model, scope=scope, metrics=best_row["metrics"],
                                                 thresholds=best_row["metrics"]["thresholds"],
                                                 data_fingerprint=data_fingerprint(train_examples))
    return selection
