"""The recipe's TF-IDF share, cross-validated: 5-fold out-of-fold predictions on all 1,500 training issues.

bench/validate_recipe.py judges candidates on 300 held-out issues, too few to choose among close ones.
Here each of the 5 folds of bench/validate_recipe.py is held out in turn while the recipe's members are
trained on the other four exactly as bench/quality.py trains them (global encoder and TF-IDF, encoders
adapted per repository, per-repository TF-IDF borrowing from the others). The members' out-of-fold
probabilities for every training issue then score the blends at each TF-IDF share, globally and per
repository, and the share each repository would pick. The test split is never read.

    .venv/bin/python bench/recipe_cv.py [--quick]      # about 40 min on 2 cores

Writes <out>/recipe-cv.json and <out>/recipe-cv.md (out: docs/quality, or var/bench-recipe-cv with
--quick), and every member's out-of-fold probabilities to <workdir>/oof-scores.json, so that a new
blend member can be judged against them without training the recipe again.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.quality import (LABELS, QUICK, REPOS, Bench, cpu_recipe, load_split, run_record,  # noqa: E402
                           run_recipe, write_report, write_scores)
from bench.validate_recipe import HOLD_OUT_EVERY, folds  # noqa: E402

SHARES = tuple(round(0.1 * n, 1) for n in range(11))  # 0: the encoder alone; 1: TF-IDF alone
OOF_SCORES = "oof-scores.json"  # under --workdir: issue (repo, label) and member → probabilities, in order
PAIRS = {"global": ("global encoder", "global tfidf"),  # (encoder member, TF-IDF member) of each blend
         "per-repo": ("per-repo adapted encoder", "per-repo tfidf")}


def out_of_fold_scores(examples: list, config, adapt: dict, workdir: Path) -> tuple[dict, dict]:
    """(member → every example's probabilities from models that never saw it, member → training seconds)."""
    assigned = folds(examples)
    scores: dict[str, list] = {}
    seconds: dict[str, float] = {}
    for fold in range(HOLD_OUT_EVERY):
        fit = [e for e, f in zip(examples, assigned, strict=True) if f != fold]
        held = [i for i, f in enumerate(assigned) if f == fold]
        bench = Bench(fit, [examples[i] for i in held], config, workdir / f"fold-{fold}")
        run_recipe(bench, adapt)
        for member in (m for pair in PAIRS.values() for m in pair):
            column = scores.setdefault(member, [None] * len(examples))
            for i, row in zip(held, bench.scores[member], strict=True):
                column[i] = row
            seconds[member] = seconds.get(member, 0.0) + bench.seconds[member]
        print(f"fold {fold + 1}/{HOLD_OUT_EVERY} done", flush=True)
    return scores, seconds


def blend_table(scores: dict, examples: list) -> dict:
    """Mean-repo macro-F1 of each blend at each share, and each repository's macro-F1 per share."""
    from core.classifier import blend_scores
    from trainer.evaluate import mean_repo_macro_f1, per_repo, top_label

    truth, repos = [e.label for e in examples], [e.repo for e in examples]
    table = {}
    for scope, (encoder, tfidf) in PAIRS.items():
        rows = {}
        for share in SHARES:
            predicted = [top_label(row) for row in blend_scores(scores[encoder], scores[tfidf], share)]
            parts = per_repo(truth, predicted, repos)
            by_repo = {repo: round(parts[repo]["macro_f1"], 4) for repo in REPOS if repo in parts}
            rows[str(share)] = {"mean": round(mean_repo_macro_f1(truth, predicted, repos), 4), **by_repo}
        table[scope] = rows
    return table


def markdown(result: dict) -> str:
    lines = [f"5-fold CV of the recipe's blends on {result['n_issues']} training issues, {result['date']}, "
             f"{result['machine']}. Out-of-fold mean-repo macro-F1 by TF-IDF share (0: the encoder alone).",
             "", "| share | " + " | ".join(f"{scope} blend" for scope in PAIRS) + " |",
             "|---" * (len(PAIRS) + 1) + "|"]
    for share in SHARES:
        lines.append(f"| {share} | " + " | ".join(f"{result['blends'][scope][str(share)]['mean']:.3f}"
                                                 for scope in PAIRS) + " |")
    lines += ["", "Per repository, the per-repository blend's share that scores best out of fold:", "",
              "| repository | best share | its macro-F1 | at 0.7 |", "|---|---|---|---|"]
    for repo, best in result["best_share_per_repo"].items():
        lines.append(f"| {repo} | {best['share']} | {best['macro_f1']:.3f} | {best['at_0.7']:.3f} |")
    return "\n".join(lines) + "\n"


def best_share_per_repo(table: dict) -> dict:
    rows = table["per-repo"]
    best = {}
    for repo in REPOS:
        share = max(SHARES, key=lambda s: (rows[str(s)].get(repo, 0.0), -abs(s - 0.7)))  # ties: nearer 0.7
        best[repo] = {"share": share, "macro_f1": rows[str(share)].get(repo, 0.0),
                      "at_0.7": rows["0.7"].get(repo, 0.0)}
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few issues, 1 epoch, 48 tokens: a smoke run")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-recipe-cv")
    args = parser.parse_args()
    out = args.out or (args.workdir if args.quick else REPO_ROOT / "docs" / "quality")

    config, adapt = cpu_recipe(args.quick, args.seed)
    examples = load_split("train", QUICK["per_class"] * 2 if args.quick else None)
    started = time.perf_counter()
    scores, seconds = out_of_fold_scores(examples, config, adapt, args.workdir)
    table = blend_table(scores, examples)
    write_scores(args.workdir / OOF_SCORES, examples, scores)
    result = run_record("recipe_cv.py", {
        "quick": args.quick, "n_issues": len(examples), "folds": HOLD_OUT_EVERY, "config": config.to_dict(),
        "adapt": adapt, "labels": LABELS, "train_minutes": {m: round(s / 60, 2) for m, s in seconds.items()},
        "wall_minutes": round((time.perf_counter() - started) / 60, 1), "blends": table,
        "best_share_per_repo": best_share_per_repo(table)})
    return write_report(out, "recipe-cv", result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())
