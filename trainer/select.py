"""Choose an encoder by the unseen-repository protocol (trainer.unseen), within a CPU training budget.

Each candidate, and the TF-IDF baseline, is trained once per fold of whole repositories and scores the
fold's issues; its score is the mean per-repository macro-F1 over those. Each candidate is also scored as
the App serves it, blended with the TF-IDF model of the same fold, its TF-IDF share chosen nested (each
fold's share is the best on the other folds' issues). What training on the whole mix would cost is
estimated from the folds (seconds per training issue × the mix's size); a row over the budget cannot win.
The winner is trained on the whole mix (a blend at the share best over all folds) and registered
(trainer.pipeline), its unseen-protocol metrics on its card.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.kinds import KINDS
from core.tables import GLOBAL_SCOPE
from trainer.baseline import BASE_MODEL as BASELINE
from trainer.blend import train_model
from trainer.config import DEFAULT_BUDGET_MINUTES, TrainConfig
from trainer.dataset import Example
from trainer.evaluate import score_predictions
from trainer.fast_path import FastPathOptions
from trainer.pipeline import train_and_register
from trainer.precision import PrecisionChoice, Verdicts
from trainer.registry import Model, Registry
from trainer.sources import DEFAULT_MIX, MixConfig, training_mix
from trainer.unseen import (
    SHARES,
    OutOfFold,
    Trainer,
    best_share,
    blend,
    make_folds,
    nested_blend,
    run_folds,
    score,
)

log = logging.getLogger(__name__)

BLEND_SUFFIX = " + TF-IDF"  # a blended row's candidate name: the encoder's, then this
BLEND_SHARES = tuple(share for share in SHARES if 0 < share < 1)  # 0 and 1 are the members' own rows


@dataclass
class Selection:
    """The comparison table (one row per candidate and per blend, the baseline first) and the winner."""

    rows: list[dict[str, Any]]
    best: dict[str, Any]
    registered: Model | None = None  # the winner as registered, when a registry was given


def select_encoder(candidates: Sequence[str], sources: Mapping[str, Sequence[Example]], config: TrainConfig, *,
                   folds: int = 3, mix: MixConfig = DEFAULT_MIX, budget_minutes: float = DEFAULT_BUDGET_MINUTES,
                   registry: Registry | None = None, scope: str = GLOBAL_SCOPE,
                   fast_path: FastPathOptions = FastPathOptions(), progress: bool = False) -> Selection:
    """Score TF-IDF, each candidate (hub id or directory) and each candidate blended with TF-IDF by the
    unseen protocol; the best row within the budget wins (TF-IDF always fits) and, given a registry, is
    trained on the whole mix and registered."""
    split = make_folds(sources, folds, seed=config.seed)
    whole = training_mix(sources, mix)
    labels = [kind for kind in KINDS if kind in {example.label for example in whole}]
    labels += sorted({example.label for example in whole} - set(labels))
    # each row's recipe (trainer.blend.train_model trains any of them), used for its folds and the whole mix
    recipes = {BASELINE: dataclasses.replace(config, base_model=BASELINE, tfidf_share=0.0)}

    # the folds train in the CPU's precision too, from the verdict the registration will read
    precision = PrecisionChoice(Verdicts.under(registry.model_dir) if registry is not None else Verdicts(None))

    def trainer(name: str) -> Trainer:
        return lambda train: train_model(recipes[name], train, labels, progress=progress,
                                         precision=precision).classifier()

    baseline = run_folds(sources, split, {BASELINE: trainer(BASELINE)}, mix, log=log.info)
    rows = [_row(BASELINE, "tfidf", split.pool, baseline, budget_minutes, len(whole))]
    for name in candidates:
        recipes[name] = dataclasses.replace(config, base_model=name, tfidf_share=0.0)
        oof = run_folds(sources, split, {name: trainer(name)}, mix, log=log.info)
        rows.append(_row(name, "transformer", split.pool, oof, budget_minutes, len(whole)))
        both = _together(oof, baseline, name)
        nested, chosen = nested_blend(both, name, BASELINE, BLEND_SHARES)
        curve = {share: score(split.pool, blend(both, name, BASELINE, share))["mean"] for share in BLEND_SHARES}
        share = best_share(both, name, BASELINE, BLEND_SHARES)
        recipes[name + BLEND_SUFFIX] = dataclasses.replace(recipes[name], tfidf_share=share)
        rows.append(_row(name + BLEND_SUFFIX, "blend", split.pool, both, budget_minutes, len(whole), scores=nested)
                    | {"tfidf_share": share, "nested_shares": chosen, "share_curve": curve})
    within = [row for row in rows if row["within_budget"]] or rows[:1]  # TF-IDF always fits
    best = max(within, key=lambda row: row["mean_repo_macro_f1"])
    selection = Selection(rows, best)
    if registry is not None:
        selection.registered = train_and_register(registry, recipes[best["candidate"]], whole, labels=labels,
                                                  scope=scope, metrics=best["metrics"], fast_path=fast_path,
                                                  progress=progress, precision=precision).model
    return selection


def _together(encoder: OutOfFold, baseline: OutOfFold, name: str) -> OutOfFold:
    """One OutOfFold holding a candidate's and TF-IDF's scores, costs added: what the blend costs."""
    both = OutOfFold(encoder.folds, trained_on=encoder.trained_on)
    both.scores = {name: encoder.scores[name], BASELINE: baseline.scores[BASELINE]}
    both.seconds = {name: encoder.seconds[name] + baseline.seconds[BASELINE]}
    both.rates = {name: 1 / (1 / encoder.rates[name] + 1 / baseline.rates[BASELINE])}
    return both


def _row(name: str, kind: str, pool: Sequence[Example], oof: OutOfFold, budget_minutes: float, whole_size: int,
         scores: Sequence[dict[str, float]] | None = None) -> dict[str, Any]:
    member = next(iter(oof.seconds))  # the row's cost: the candidate's (with TF-IDF's added, for a blend)
    scores = oof.scores[member] if scores is None else scores
    metrics = score_predictions([e.label for e in pool], scores, [e.repo for e in pool],
                                sorted({e.label for e in pool}), target_precision=0.9)
    estimate = oof.seconds[member] / max(1, sum(oof.trained_on)) * whole_size / 60
    log.info("%s: unseen mean-repo macro-F1 %.4f", name, metrics["mean_repo_macro_f1"])
    return {"candidate": name, "kind": kind,
            "mean_repo_macro_f1": metrics["mean_repo_macro_f1"], "macro_f1": metrics["macro_f1"],
            "train_seconds": oof.seconds[member], "whole_mix_minutes": estimate,
            "within_budget": estimate <= budget_minutes, "issues_per_second": oof.rates[member],
            "metrics": metrics | {"protocol": "unseen repositories", "folds": oof.folds.groups}}
