"""Quality on repositories a model never saw: folds of whole repositories held out (trainer.unseen).

    nice .venv/bin/python -m bench.unseen [--quick] [--folds 4] [--max-length 64] [--save-fold-models]

Writes <out>/unseen.json and .md (out: docs/quality, or var/bench-unseen with --quick): the mean
per-repository macro-F1 of TF-IDF, the encoder and their blend (share chosen nested), and unless
`--no-nlbse24` the whole-mix models on NLBSE'24's test split. Protocol and results: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from bench.quality import REPOS, bootstrap_interval, run_record, write_report
from tests.paths import REPO_ROOT, SHARED
from trainer.config import BOOTSTRAP_RECIPE

QUICK = {"folds": 2, "per_group_kind": 6, "eval_per_group_kind": 4, "max_length": 32, "max_steps": 4}


class FoldModels:
    """Each fold's trained members, saved as one blend per fold (registry directory format) under
    <workdir>/fold-K/: a model that never saw the fold's repositories, for replays that start from it.

    Its card carries what the served model's does: the metrics and per-kind thresholds measured on
    `held_out` (NLBSE'24's test split, as the bootstrap's), less the fold's own repositories, so a replay
    with a target precision starts from the thresholds an install would get."""

    def __init__(self, folds, workdir: Path, tfidf_share: float, held_out=()):
        self.folds, self.workdir, self.tfidf_share = folds, workdir, tfidf_share
        self.held_out = list(held_out)
        self.trained: dict[int, dict] = {}

    def keeping(self, name: str, train):
        """`train` (issues → a trained model), returning its classifier and keeping the model by fold."""
        def trainer(examples):
            model = train(examples)
            present = {example.repo for example in examples}  # the fold it left out (None: the whole mix)
            fold = next((i for i, group in enumerate(self.folds.groups) if not present & set(group)), None)
            if fold is not None:
                self.trained.setdefault(fold, {})[name] = model
                self.save(fold)
            return model.classifier("bench")
        return trainer

    def save(self, fold: int) -> None:
        from trainer.blend import TrainedBlend
        from trainer.evaluate import evaluate_classifier

        members = self.trained[fold]
        if {"encoder", "tfidf"} <= set(members):
            blend = TrainedBlend(members["encoder"], members["tfidf"], self.tfidf_share)
            left_out = set(self.folds.groups[fold])
            held_out = [example for example in self.held_out if example.repo not in left_out]
            metrics = evaluate_classifier(blend.classifier(f"unseen-fold-{fold}"), held_out) if held_out else None
            blend.save(self.workdir / f"fold-{fold}", version=f"unseen-fold-{fold}", metrics=metrics,
                       thresholds=(metrics or {}).get("thresholds"))

    def write_index(self) -> None:
        """repository → the fold directory whose blend never saw it."""
        index = {repo: f"fold-{i}" for i, group in enumerate(self.folds.groups) for repo in group
                 if i in self.trained}
        (self.workdir / "fold-of-repository.json").write_text(json.dumps(index, indent=1) + "\n")


def members(config, kinds, keep: FoldModels | None = None):
    """name → trainer: TF-IDF + LR and the fine-tuned encoder, per fold; with `keep`, the folds' models are
    kept and saved."""
    from trainer.baseline import train_tfidf
    from trainer.train import fine_tune

    def tfidf(train):
        return train_tfidf(train, seed=config.seed)

    def fine_tuned(train):
        return fine_tune(config, train, kinds, progress=False)

    if keep is None:
        return {"tfidf": lambda train: tfidf(train).classifier("bench"),
                "encoder": lambda train: fine_tuned(train).classifier("bench")}
    return {"tfidf": keep.keeping("tfidf", tfidf), "encoder": keep.keeping("encoder", fine_tuned)}


def summary(examples, scores, seconds=None, rate=None) -> dict:
    """`trainer.unseen.score` with its interval and costs, rounded for the tables."""
    from trainer.evaluate import top_label
    from trainer.unseen import score

    result = score(examples, scores)
    truth, predicted = [e.label for e in examples], [top_label(row) for row in scores]
    return {"mean": round(result["mean"], 4),
            "mean_95": bootstrap_interval(truth, predicted, [e.repo for e in examples]),
            "per_kind": {kind: round(row["f1"], 4) for kind, row in result["per_kind"].items()},
            "per_kind_precision_recall": {kind: [round(row["precision"], 3), round(row["recall"], 3)]
                                          for kind, row in result["per_kind"].items()},
            "per_repo": {repo: round(value, 4) for repo, value in result["per_repo"].items()},
            **({"train_minutes": round(seconds / 60, 2)} if seconds is not None else {}),
            **({"issues_per_second": round(rate, 1)} if rate is not None else {})}


def unseen_rows(oof, shares) -> dict:
    """TF-IDF, encoder, the nested blend and the fixed shares, on the unseen protocol."""
    from trainer.unseen import best_share, blend, nested_blend

    pool = oof.folds.pool
    rows = {name: summary(pool, oof.scores[name], oof.seconds[name], oof.rates[name]) for name in oof.scores}
    nested, chosen = nested_blend(oof, "encoder", "tfidf")
    both = oof.seconds["encoder"] + oof.seconds["tfidf"]
    rate = 1 / (1 / oof.rates["encoder"] + 1 / oof.rates["tfidf"])
    rows["blend, share chosen nested"] = summary(pool, nested, both, rate) | {"chosen_shares": chosen}
    served = best_share(oof, "encoder", "tfidf")
    for share in sorted(set(shares) | {served}):
        rows[f"blend, TF-IDF share {share:g}"] = summary(pool, blend(oof, "encoder", "tfidf", share), both, rate)
    return rows | {"best share": served}


def nlbse_rows(trained: dict, test, shares) -> dict:
    """The whole-mix models on NLBSE'24's test split: mean of its 5 repositories' macro-F1."""
    from core.classifier import blend_scores
    from trainer.evaluate import predict_all

    scores = {name: predict_all(model, [e.text for e in test], 32) for name, model in trained.items()}
    rows = {name: summary(test, rows) for name, rows in scores.items()}
    for share in shares:
        rows[f"blend, TF-IDF share {share:g}"] = summary(test, blend_scores(scores["encoder"], scores["tfidf"],
                                                                            share))
    return rows


def run(args) -> dict:
    """The whole benchmark; returns the result to write."""
    import torch
    import transformers

    from core.kinds import KINDS
    from trainer.config import TrainConfig
    from trainer.dataset import load_file
    from trainer.sources import NLBSE_TEST_FILE, MixConfig, capped, describe, load_sources, training_mix
    from trainer.unseen import make_folds, run_folds

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(2)
    quick = QUICK if args.quick else {}
    recipe = BOOTSTRAP_RECIPE | {"max_length": quick.get("max_length", args.max_length), "epochs": args.epochs}
    recipe |= {"class_weight": args.class_weight} if args.class_weight else {}
    recipe |= {"lr": args.lr} if args.lr else {}
    config = TrainConfig(device="cpu", seed=args.seed, max_steps=quick.get("max_steps"),
                         base_model=args.base_model, **recipe)
    mix = MixConfig(per_group_kind=quick.get("per_group_kind", args.per_group_kind), seed=args.seed)
    data = SHARED / "data"
    sources = load_sources(data)
    folds = make_folds(sources, quick.get("folds", args.folds),
                       per_group_kind=quick.get("eval_per_group_kind", args.eval_per_group_kind), seed=args.seed)
    print(f"{len(folds.groups)} folds: {folds.groups}; scoring {describe(folds.pool)}", flush=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    test = [e for e in load_file(data / NLBSE_TEST_FILE) if e.repo in REPOS]
    test = test if not args.quick else test[::50]
    keep = FoldModels(folds, args.workdir, config.tfidf_share, test) if args.save_fold_models else None
    models = members(config, KINDS, keep)
    oof = run_folds(sources, folds, models, mix, log=lambda line: print(line, flush=True))
    if keep is not None:
        keep.write_index()
    shares = (0.3, 0.5, 0.7)
    result = {"config": config.to_dict(), "mix": dataclasses.asdict(mix), "folds": folds.groups,
              "trained_on": oof.trained_on, "scored": describe(folds.pool), "unseen": unseen_rows(oof, shares)}
    if args.no_nlbse24:
        return result
    whole = training_mix(sources, mix)
    test = capped(test, args.nlbse_per_repo_kind, args.seed) if args.nlbse_per_repo_kind else test
    started = time.perf_counter()
    trained = {name: trainer(whole) for name, trainer in models.items()}
    result["whole_mix_train_minutes"] = round((time.perf_counter() - started) / 60, 2)
    result["nlbse24"] = nlbse_rows(trained, test, sorted(set(shares) | {result["unseen"]["best share"]}))
    result["whole_mix"] = describe(whole)
    return result


def markdown(result: dict) -> str:
    """Both tables and the per-repository scores of the served blend."""
    unseen, nlbse = result["unseen"], result.get("nlbse24", {})
    kinds = ["bug", "feature", "question", "docs"]
    lines = [f"Unseen repositories ({len(result['folds'])} folds of whole repositories; scored: {result['scored']})",
             "", "| model | mean per-repo macro-F1 [95 %] | " + " | ".join(f"{k} F1" for k in kinds)
             + " | train min (all folds) | issues/s |", "|---" * (5 + len(kinds)) + "|"]
    for name, row in unseen.items():
        if isinstance(row, dict):
            lines.append(f"| {name} | {row['mean']:.4f} [{row['mean_95'][0]:.3f}, {row['mean_95'][1]:.3f}] | "
                         + " | ".join(f"{row['per_kind'].get(k, float('nan')):.3f}" for k in kinds)
                         + f" | {row.get('train_minutes', '')} | {row.get('issues_per_second', '')} |")
    lines += ["", (f"Best TF-IDF share over all folds: {unseen['best share']}; nested choices per fold: "
              f"{unseen['blend, share chosen nested']['chosen_shares']}"), ""]
    if nlbse:
        lines += ["NLBSE'24 protocol (trained on the whole mix, scored on its test split)", "",
                  "| model | mean per-repo macro-F1 [95 %] | " + " | ".join(REPOS) + " |",
                  "|---" * (2 + len(REPOS)) + "|"]
    for name, row in nlbse.items():
        lines.append(f"| {name} | {row['mean']:.4f} [{row['mean_95'][0]:.3f}, {row['mean_95'][1]:.3f}] | "
                     + " | ".join(f"{row['per_repo'].get(r, float('nan')):.3f}" for r in REPOS) + " |")
    served = unseen[f"blend, TF-IDF share {unseen['best share']:g}"]
    lines += ["", "Per repository (unseen), TF-IDF / encoder / blend at the best share", "",
              "| repository | TF-IDF | encoder | blend |", "|---|---|---|---|"]
    for repo, value in served["per_repo"].items():
        lines.append(f"| {repo} | {unseen['tfidf']['per_repo'][repo]:.3f} | "
                     f"{unseen['encoder']['per_repo'][repo]:.3f} | {value:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few issues, 2 folds, 4 steps: a smoke run")
    parser.add_argument("--folds", type=int, default=4, help="folds of whole repositories")
    parser.add_argument("--max-length", type=int, default=64, help="tokens per issue in the protocol")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--per-group-kind", type=int, default=300,
                        help="training issues per repository and kind (the mix's cap; the recipe's is 300)")
    parser.add_argument("--nlbse-per-repo-kind", type=int, default=None,
                        help="score only this many NLBSE'24 test issues per repository and kind (default all)")
    parser.add_argument("--eval-per-group-kind", type=int, default=150,
                        help="issues scored per repo and kind (a large number scores every issue)")
    parser.add_argument("--base-model", default=None, help="encoder (hub id or directory); default MiniLM")
    parser.add_argument("--class-weight", choices=("none", "balanced"), default=None,
                        help="none: the plain loss; balanced: each kind counts alike in the fine-tuning loss "
                             "(TrainConfig.class_weight; default: the recipe's)")
    parser.add_argument("--no-nlbse24", action="store_true",
                        help="skip the whole-mix models and the NLBSE'24 test-split table")
    parser.add_argument("--save-fold-models", action="store_true",
                        help="save each fold's blend to <workdir>/fold-K/ and <workdir>/fold-of-repository.json")
    parser.add_argument("--lr", type=float, default=None, help="TrainConfig.lr (default: the recipe's)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-unseen")
    args = parser.parse_args()
    out = args.out or (args.workdir if args.quick else REPO_ROOT / "docs" / "quality")
    started = time.perf_counter()
    result = run(args)
    minutes = round((time.perf_counter() - started) / 60, 1)
    result = run_record("unseen.py", {"quick": args.quick, "wall_minutes": minutes, **result})
    return write_report(out, "unseen", result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())
