"""Choose the recipe's blend on a validation split of the NLBSE'24 training issues; the test split stays unseen.

Every fifth training issue of each repository and label is held out for validation; the rest trains
the recipe's members as bench/quality.py does (global TF-IDF and encoder, per-repository TF-IDF and
encoder adapted from the global one), plus cheap candidates: TF-IDF on each repository's own issues
only, and logistic regression on the frozen MiniLM's mean-pooled embeddings. Each member's validation
probabilities are saved, then every candidate blend (weights over members) is scored as the mean over
repositories of per-repository macro-F1.

    .venv/bin/python bench/validate_recipe.py [--quick]

Writes <out>/validation.json (member scores and the blends' results) and <out>/validation.md
(out: docs/quality, or var/bench-validate with --quick). Rerun the blends alone from saved scores with
--from-scores FILE.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.quality import (LABELS, OWN_TFIDF, QUICK, Bench, cpu_recipe,  # noqa: E402
                           load_split, run_recipe, run_record, write_report)

HOLD_OUT_EVERY = 5  # every 5th issue of a repository and label: 60 per repository, labels kept balanced
SHARES = (0.5, 0.6, 0.7, 0.8)  # TF-IDF's share of a blend
FROZEN_WEIGHTS = (0.1, 0.2)  # the frozen-embedding model's share, on top of a blend


def folds(examples: list, k: int = HOLD_OUT_EVERY) -> list[int]:
    """Each example's fold, 0 to k-1: the n-th issue of its repository and label goes to fold n mod k."""
    seen, assigned = {}, []
    for example in examples:
        key = example.repo, example.label
        seen[key] = seen.get(key, 0) + 1
        assigned.append(seen[key] % k)
    return assigned


def hold_out(examples: list) -> tuple[list, list]:
    """(fit, validation): the 5th, 10th, … issue of each repository and label goes to validation."""
    fit, validation = [], []
    for example, fold in zip(examples, folds(examples), strict=True):
        (validation if fold == 0 else fit).append(example)
    return fit, validation


def frozen(issues: list, config) -> tuple[object, float]:
    """Logistic regression on the untouched MiniLM's mean-pooled embeddings (SetFit without its pairs)."""
    from sklearn.linear_model import LogisticRegression
    from transformers import AutoModel, AutoTokenizer

    from bench.setfit_style import fit_head

    path = config.resolved_base_model()
    head = LogisticRegression(max_iter=2000, C=4.0, class_weight="balanced", random_state=config.seed)
    model = fit_head(AutoModel.from_pretrained(path), AutoTokenizer.from_pretrained(path),
                     [e.text for e in issues], [e.label for e in issues], head, max_length=config.max_length)
    return model, model.seconds


def candidate_blends() -> dict[str, dict[str, float]]:
    """Named weightings of the members; weights sum to 1."""
    encoders_both = {"per-repo adapted encoder": 0.5, "global encoder": 0.5}
    tfidf_both = {"per-repo tfidf": 0.5, "global tfidf": 0.5}
    blends = {}
    for share in SHARES:
        blends[f"global: encoder + tfidf, share {share}"] = {"global encoder": 1 - share, "global tfidf": share}
        blends[f"per-repo: encoder + tfidf, share {share}"] = {"per-repo adapted encoder": 1 - share,
                                                               "per-repo tfidf": share}
        blends[f"per-repo: encoder + own tfidf, share {share}"] = {"per-repo adapted encoder": 1 - share,
                                                                   OWN_TFIDF: share}
        blends[f"per-repo: encoder + both tfidf, share {share}"] = _mix(
            {"per-repo adapted encoder": 1.0}, tfidf_both, share)
        blends[f"per-repo: both encoders + both tfidf, share {share}"] = _mix(encoders_both, tfidf_both, share)
    for name in list(blends):
        scope = "global" if name.startswith("global") else "per-repo"
        for weight in FROZEN_WEIGHTS:
            blends[f"{name} + frozen {weight}"] = _mix(blends[name], {f"{scope} frozen": 1.0}, weight)
    return blends


def _mix(first: dict[str, float], second: dict[str, float], second_share: float) -> dict[str, float]:
    mixed = {member: weight * (1 - second_share) for member, weight in first.items()}
    for member, weight in second.items():
        mixed[member] = mixed.get(member, 0.0) + weight * second_share
    return mixed


def score_blends(scores: dict[str, list[dict]], validation: list) -> dict[str, float]:
    """Each candidate blend's mean-repo macro-F1 on the validation issues."""
    from trainer.evaluate import mean_repo_macro_f1, top_label

    truth, repos = [e.label for e in validation], [e.repo for e in validation]
    results = {}
    for name, weights in candidate_blends().items():
        if not set(weights) <= set(scores):
            continue
        rows = [{label: sum(w * scores[m][i][label] for m, w in weights.items()) for label in LABELS}
                for i in range(len(validation))]
        results[name] = round(mean_repo_macro_f1(truth, [top_label(row) for row in rows], repos), 4)
    for member in scores:
        results[f"{member} alone"] = round(mean_repo_macro_f1(truth, [top_label(r) for r in scores[member]],
                                                              repos), 4)
    return dict(sorted(results.items(), key=lambda item: -item[1]))


def _rounded(scores: dict[str, list[dict]]) -> dict[str, list[dict]]:
    return {member: [{label: round(p, 5) for label, p in row.items()} for row in rows]
            for member, rows in scores.items()}


def markdown(result: dict) -> str:
    lines = [f"Validation: {result['n_fit']} training issues fit, {result['n_validation']} held out "
             f"(every {HOLD_OUT_EVERY}th per repository and label), {result['date']}, {result['machine']}.", "",
             "| candidate (weights in validation.json) | validation mean-repo macro-F1 |", "|---|---|"]
    lines += [f"| {name} | {score:.3f} |" for name, score in result["blends"].items()]
    return "\n".join(lines) + "\n"


def train_members(fit: list, validation: list, config, adapt: dict, workdir: Path) -> Bench:
    bench = Bench(fit, validation, config, workdir)
    run_recipe(bench, adapt)
    bench.add("global frozen", *frozen(fit, config))
    bench.add_per_repo("per-repo frozen", lambda repo, issues: frozen(issues, config))
    return bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few issues, 1 epoch, 48 tokens: a smoke run")
    parser.add_argument("--from-scores", type=Path, help="score the blends from a saved validation.json")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-validate")
    args = parser.parse_args()
    out = args.out or (args.workdir if args.quick else REPO_ROOT / "docs" / "quality")

    per_class = QUICK["per_class"] * 2 if args.quick else None
    fit, validation = hold_out(load_split("train", per_class))
    if args.from_scores:
        result = json.loads(args.from_scores.read_text())
        result["member_scores"] = _rounded(result["member_scores"])
        result["blends"] = score_blends(result["member_scores"], validation)
    else:
        config, adapt = cpu_recipe(args.quick, args.seed)
        started = time.perf_counter()
        bench = train_members(fit, validation, config, adapt, args.workdir)
        result = run_record("validate_recipe.py", {
            "quick": args.quick, "n_fit": len(fit), "n_validation": len(validation), "config": config.to_dict(),
            "adapt": adapt, "train_minutes": {name: round(s / 60, 2) for name, s in bench.seconds.items()},
            "wall_minutes": round((time.perf_counter() - started) / 60, 1),
            "candidates": candidate_blends(), "member_scores": _rounded(bench.scores),
            "blends": score_blends(bench.scores, validation)})
    return write_report(out, "validation", result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())
