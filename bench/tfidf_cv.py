"""How much a repository's TF-IDF model should learn from the other repositories' issues: 5-fold CV.

Each repository's TF-IDF + logistic regression is fit on the training folds of every repository, the
other repositories' issues weighted w against one of its own (w = 0: its own issues only; w = 1: the
global model), and scored on its issues of the held-out fold. Out-of-fold predictions for all 1,500
NLBSE'24 training issues give the mean-repo macro-F1 per w; the test split is never read. Folds are
bench/validate_recipe.py's: its validation split is fold 0.

    .venv/bin/python bench/tfidf_cv.py [--quick]

Writes <out>/tfidf-cv.json and <out>/tfidf-cv.md (out: docs/quality, or var/bench-tfidf-cv with --quick).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.quality import QUICK, REPOS, load_split, repo_tfidf, run_record, write_report  # noqa: E402
from bench.validate_recipe import HOLD_OUT_EVERY, folds  # noqa: E402

OTHERS_WEIGHTS = (0.0, 0.3, 0.5, 1.0)


def out_of_fold_predictions(examples: list, others: float, seed: int = 42) -> list[str]:
    """Every example's label as predicted by a per-repository model that never saw its fold."""
    from trainer.baseline import train_tfidf
    from trainer.evaluate import top_label

    assigned = folds(examples)
    predicted: list[str | None] = [None] * len(examples)
    for fold in range(HOLD_OUT_EVERY):
        fit = [e for e, f in zip(examples, assigned, strict=True) if f != fold]
        for repo in REPOS:
            if others == 0.0:
                own = [e for e in fit if e.repo == repo]
                model = train_tfidf(own, seed=seed)
            else:
                model = repo_tfidf(fit, repo, seed, others)
            rows = [i for i, e in enumerate(examples) if assigned[i] == fold and e.repo == repo]
            scores = model.classifier().predict([examples[i].text for i in rows])
            for i, row in zip(rows, scores, strict=True):
                predicted[i] = top_label(row)
    return predicted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few issues per repository and label")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or (REPO_ROOT / "var" / "bench-tfidf-cv" if args.quick else REPO_ROOT / "docs" / "quality")

    from trainer.evaluate import mean_repo_macro_f1

    examples = load_split("train", QUICK["per_class"] * 2 if args.quick else None)
    truth, repos = [e.label for e in examples], [e.repo for e in examples]
    scores, seconds = {}, {}
    for others in OTHERS_WEIGHTS:
        started = time.perf_counter()
        predicted = out_of_fold_predictions(examples, others)
        scores[str(others)] = round(mean_repo_macro_f1(truth, predicted, repos), 4)
        seconds[str(others)] = round(time.perf_counter() - started, 1)
        print(f"other repositories weighted {others}: {scores[str(others)]:.4f} ({seconds[str(others)]} s)",
              flush=True)
    result = run_record("tfidf_cv.py", {"quick": args.quick, "n_issues": len(examples), "folds": HOLD_OUT_EVERY,
                                        "mean_repo_macro_f1": scores, "seconds": seconds})
    lines = [f"5-fold CV of per-repository TF-IDF on {len(examples)} training issues, {result['date']}, "
             f"{result['machine']}.", "",
             "| other repositories' weight | out-of-fold mean-repo macro-F1 |", "|---|---|"]
    lines += [f"| {w}{' (own issues only)' if w == '0.0' else ' (the global model)' if w == '1.0' else ''} "
              f"| {score:.3f} |" for w, score in scores.items()]
    return write_report(out, "tfidf-cv", result, "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
