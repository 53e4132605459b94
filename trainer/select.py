"""Choose an encoder by the unseen-repository protocol (trainer.unseen), within a CPU training budget.

Each candidate, and the TF-IDF baseline, is trained once per fold of whole repositories and scores the
fold's issues; its score is the mean per-repository macro-F1 over those. What training the candidate on
the whole mix would cost is estimated from its folds (seconds per training issue × the mix's size); a
candidate over the budget cannot win. The winner is trained on the whole mix and registered.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.kinds import KINDS
from core.tables import GLOBAL_SCOPE, ModelVersion
from trainer.baseline import BASE_MODEL as BASELINE
from trainer.baseline import train_tfidf
from trainer.config import DEFAULT_BUDGET_MINUTES, TrainConfig
from trainer.dataset import Example, data_fingerprint
from trainer.evaluate import score_predictions
from trainer.registry import Registry
from trainer.sources import DEFAULT_MIX, MixConfig, training_mix
from trainer.train import fine_tune
from trainer.unseen import make_folds, run_folds

log = logging.getLogger(__name__)


@dataclass
class Selection:
    """The comparison table (one row per candidate, the baseline included) and the winner."""

    rows: list[dict[str, Any]]
    best: dict[str, Any]
    registered: ModelVersion | None = None  # the winner's registry row, when a registry was given


def select_encoder(candidates: Sequence[str], sources: Mapping[str, Sequence[Example]], config: TrainConfig, *,
                   folds: int = 3, mix: MixConfig = DEFAULT_MIX, budget_minutes: float = DEFAULT_BUDGET_MINUTES,
                   registry: Registry | None = None, scope: str = GLOBAL_SCOPE,
                   progress: bool = False, eval_per_group_kind: int = 150) -> Selection:
    """Score TF-IDF and each candidate (hub id or directory) by the unseen protocol; the best within the
    budget wins (an encoder that cannot beat TF-IDF is not worth serving) and, given a registry, is
    trained on the whole mix and registered."""
    split = make_folds(sources, folds, per_group_kind=eval_per_group_kind, seed=config.seed)
    whole = training_mix(sources, mix)
    labels = [kind for kind in KINDS if kind in {example.label for example in whole}]
    labels += sorted({example.label for example in whole} - set(labels))
    trainers = {BASELINE: (None, lambda train: train_tfidf(train, seed=config.seed))}
    for name in candidates:
        candidate = dataclasses.replace(config, base_model=name)
        trainers[name] = (candidate, lambda train, c=candidate: fine_tune(c, train, labels, progress=progress))
    rows = [_row(name, kind, split, sources, trainer, mix, len(whole), budget_minutes)
            for name, (kind, trainer) in trainers.items()]
    within = [row for row in rows if row["within_budget"]] or rows[:1]  # TF-IDF always fits
    best = max(within, key=lambda row: row["mean_repo_macro_f1"])
    selection = Selection(rows, best)
    if registry is not None:
        trained = trainers[best["candidate"]][1](whole)
        selection.registered = registry.register(trained, scope=scope, metrics=best["metrics"],
                                                 thresholds=best["metrics"]["thresholds"],
                                                 data_fingerprint=data_fingerprint(whole))
    return selection


def _row(name, config, split, sources, trainer, mix, whole_size: int, budget_minutes: float) -> dict[str, Any]:
    oof = run_folds(sources, split, {name: lambda train: trainer(train).classifier()}, mix, log=log.info)
    pool = split.pool
    metrics = score_predictions([e.label for e in pool], oof.scores[name], [e.repo for e in pool],
                                sorted({e.label for e in pool}), target_precision=0.9)
    estimate = oof.seconds[name] / max(1, sum(oof.trained_on)) * whole_size / 60
    log.info("%s: unseen mean-repo macro-F1 %.4f", name, metrics["mean_repo_macro_f1"])
    return {"candidate": name, "kind": "tfidf" if config is None else "transformer",
            "mean_repo_macro_f1": metrics["mean_repo_macro_f1"], "macro_f1": metrics["macro_f1"],
            "train_seconds": oof.seconds[name], "whole_mix_minutes": estimate,
            "within_budget": estimate <= budget_minutes, "issues_per_second": oof.rates[name],
            "metrics": metrics | {"protocol": "unseen repositories", "folds": split.groups}}
