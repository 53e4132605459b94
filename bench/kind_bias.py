"""Does the weakest kind gain from a per-kind weight on the served scores? (issue 24, item 5: questions)

The fine-tuned encoder and TF-IDF both say "question" too rarely on repositories they never saw. A weight
per kind (scores × w, renormalised; bug's weight fixed at 1) moves the decision towards a kind without
retraining. Chosen leave-one-repository-out on bench/unseen.py's out-of-fold served scores: for each
repository, the weights best on all the *other* ones by mean per-repository macro-F1 (over the kinds each
repository has), reported on the held-out one beside the unweighted scores, with accuracy and each kind's
F1. No model is run.

    nice .venv/bin/python -m bench.kind_bias [--workdir var/bench-unseen] [--share 0.5]

Writes <out>/kind-bias.json and .md (out: docs/quality).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from bench.unseen import add_out_of_fold_arguments, served_out_of_fold
from core.kinds import KINDS

REPO_ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = (0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)  # per kind but bug (the reference)


def per_repository(truth: np.ndarray, predicted: np.ndarray, repos: np.ndarray) -> dict[str, dict]:
    """Each repository's macro-F1 over its kinds, accuracy, and each kind's F1 (kinds: indices of KINDS),
    from one confusion matrix per repository (numpy: the grid search scores thousands of weightings)."""
    names, index = np.unique(repos, return_inverse=True)
    n = len(KINDS)
    confusion = np.bincount((index * n + truth) * n + predicted, minlength=len(names) * n * n)
    confusion = confusion.reshape(len(names), n, n)  # [repo, truth, predicted]
    hits = np.einsum("rkk->rk", confusion)
    support, said = confusion.sum(axis=2), confusion.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.nan_to_num(2 * hits / (support + said))
    result = {}
    for r, repo in enumerate(names):
        present = np.flatnonzero(support[r])
        result[str(repo)] = {"macro_f1": float(f1[r, present].mean()),
                             "accuracy": float(hits[r].sum() / support[r].sum()),
                             "f1": {KINDS[k]: float(f1[r, k]) for k in present}}
    return result


def mean_macro_f1(truth, scores, repos, weights) -> float:
    predicted = np.argmax(scores * weights, axis=1)
    return float(np.mean([row["macro_f1"] for row in per_repository(truth, predicted, repos).values()]))


def choose(truth, scores, repos, grid) -> tuple[np.ndarray, float]:
    best, best_score = None, -1.0
    for weights in grid:
        score = mean_macro_f1(truth, scores, repos, weights)
        if score > best_score:
            best, best_score = weights, score
    return best, best_score


def summary(rows: dict[str, dict]) -> dict:
    kinds = {kind: [row["f1"][kind] for row in rows.values() if kind in row["f1"]] for kind in KINDS}
    return {"macro_f1": round(float(np.mean([row["macro_f1"] for row in rows.values()])), 3),
            "accuracy": round(float(np.mean([row["accuracy"] for row in rows.values()])), 3),
            "f1": {kind: round(float(np.mean(values)), 3) for kind, values in kinds.items() if values}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_of_fold_arguments(parser)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args(argv)
    if not (args.workdir / "unseen-oof.json").exists():
        parser.error(f"no {args.workdir / 'unseen-oof.json'}: run python -m bench.unseen --workdir {args.workdir} "
                     "first")
    pool, served, _ = served_out_of_fold(args.workdir, args.share)
    truth = np.array([KINDS.index(issue["label"]) for issue in pool])
    repos = np.array([issue["repo"] for issue in pool])
    scores = np.array([[row[kind] for kind in KINDS] for row in served])
    grid = [np.array((1.0, *rest)) for rest in itertools.product(WEIGHTS, repeat=len(KINDS) - 1)]
    held_out_rows, plain_rows, chosen = {}, {}, {}
    for repo in np.unique(repos):
        others = repos != repo
        weights, _ = choose(truth[others], scores[others], repos[others], grid)
        mask = ~others
        chosen[str(repo)] = dict(zip(KINDS, map(float, weights), strict=True))
        held_out_rows |= per_repository(truth[mask], np.argmax(scores[mask] * weights, axis=1), repos[mask])
        plain_rows |= per_repository(truth[mask], np.argmax(scores[mask], axis=1), repos[mask])
        print(f"{repo}: weights {chosen[str(repo)]}: macro-F1 {plain_rows[str(repo)]['macro_f1']:.3f} -> "
              f"{held_out_rows[str(repo)]['macro_f1']:.3f}", flush=True)
    on_all, _ = choose(truth, scores, repos, grid)
    record = {"date": dt.date.today().isoformat(), "share": args.share, "issues": len(pool),
              "plain": summary(plain_rows), "weighted_held_out": summary(held_out_rows),
              "weights_on_all": dict(zip(KINDS, map(float, on_all), strict=True)), "chosen": chosen,
              "per_repository": {repo: {"plain": plain_rows[repo], "weighted": held_out_rows[repo]}
                                 for repo in plain_rows},
              "command": "python -m bench.kind_bias " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kind-bias.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [f"# A weight per kind on the served scores, chosen leave-one-repository-out ({record['date']})", "",
             f"Command: `{record['command']}`; {len(pool)} issues of {len(plain_rows)} repositories, blend share "
             f"{args.share}.", "", "| scores | mean macro-F1 | accuracy | " + " | ".join(KINDS) + " |",
             "|---|---|---|" + "---|" * len(KINDS)]
    for name, row in (("served", record["plain"]), ("weighted (held out)", record["weighted_held_out"])):
        lines.append(f"| {name} | {row['macro_f1']} | {row['accuracy']} | "
                     + " | ".join(str(row["f1"].get(kind, "")) for kind in KINDS) + " |")
    lines += ["", f"Weights chosen on every repository: {record['weights_on_all']}", ""]
    (args.out / "kind-bias.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
