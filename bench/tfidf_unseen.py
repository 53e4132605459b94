"""What more training data would move on the unseen protocol, measured where it is cheap: TF-IDF alone.

The fine-tuned encoder costs minutes per fold on CPU; TF-IDF seconds. So this runs TF-IDF over the same
scored issues as bench/unseen.py (at most --eval-per-group-kind of each repository and kind) with more
and more training data: the mix's cap per repository and kind, and the number of folds (3 folds train
each model on about two thirds of the repositories; leave-one-repository-out, `--folds` at least the
number of repositories, on all but one). The slope says how far more of the same data would go.

    nice .venv/bin/python bench/tfidf_unseen.py [--caps 75,150,300,100000] [--folds 3,16]

Writes <out>/<stem>.json and .md (out: docs/quality, stem: tfidf-unseen).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.quality import run_record, write_report
from bench.unseen import summary
from tests.paths import SHARED


def run(args) -> dict:
    from trainer.baseline import train_tfidf
    from trainer.sources import MixConfig, describe, load_sources, training_mix
    from trainer.unseen import make_folds, run_folds

    sources = load_sources(SHARED / "data")
    rows = []
    for k in args.folds:
        folds = make_folds(sources, k, per_group_kind=args.eval_per_group_kind, seed=args.seed)
        for cap in args.caps:
            mix = MixConfig(per_group_kind=cap, seed=args.seed)
            for c in args.c:
                tfidf = {"tfidf": lambda train, c=c: train_tfidf(train, seed=args.seed, c=c).classifier("bench")}
                started = time.perf_counter()
                oof = run_folds(sources, folds, tfidf, mix, log=lambda line: None)
                row = summary(folds.pool, oof.scores["tfidf"], oof.seconds["tfidf"])
                rows.append({"folds": len(folds.groups), "cap": cap, "c": c,
                             "whole_mix": describe(training_mix(sources, mix)),
                             "mean_trained_on": round(sum(oof.trained_on) / len(oof.trained_on)), **row})
                print(f"{len(folds.groups)} folds, cap {cap}, C {c:g}: trained on {rows[-1]['mean_trained_on']} "
                      f"per fold, {row['mean']:.4f} ({time.perf_counter() - started:.0f} s)", flush=True)
    return {"scored": describe(folds.pool), "rows": rows}


def markdown(result: dict) -> str:
    kinds = ["bug", "feature", "question", "docs"]
    lines = [f"TF-IDF alone on the unseen protocol, more and more training data (scored: {result['scored']})", "",
             "| folds | cap per repo and kind | C | issues per fold's model | mean per-repo macro-F1 [95 %] | "
             + " | ".join(f"{k} F1" for k in kinds) + " |", "|---" * (5 + len(kinds)) + "|"]
    for row in result["rows"]:
        lines.append(f"| {row['folds']} | {row['cap']} | {row['c']:g} | {row['mean_trained_on']} | {row['mean']:.4f} "
                     f"[{row['mean_95'][0]:.3f}, {row['mean_95'][1]:.3f}] | "
                     + " | ".join(f"{row['per_kind'].get(k, float('nan')):.3f}" for k in kinds) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    numbers = lambda text: [int(part) for part in text.split(",")]  # noqa: E731
    parser.add_argument("--caps", type=numbers, default=[75, 150, 300, 100_000],
                        help="training issues per repository and kind (100000: every issue)")
    parser.add_argument("--folds", type=numbers, default=[3, 16], help="fold counts; 16 or more: one per repository")
    parser.add_argument("--c", type=lambda text: [float(part) for part in text.split(",")], default=[4.0],
                        help="LogisticRegression C values to try (the served 4)")
    parser.add_argument("--eval-per-group-kind", type=int, default=30, help="issues scored per repo and kind")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    parser.add_argument("--stem", default="tfidf-unseen", help="file name of the report, without suffix")
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args)
    result = run_record("tfidf_unseen.py", {"wall_minutes": round((time.perf_counter() - started) / 60, 1), **result})
    return write_report(args.out, args.stem, result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())
