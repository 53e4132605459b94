"""Memory sweep: which combination of model scores, repository prior and kNN vote (core.memory) is best?

The served model scores and embeds a repository's issues once, in the order `issue-sorter replay` feeds
them (time, or seeded shuffled); then each issue is scored with the memory of every issue before it (the
replay's simulated maintainer confirms every issue), for each setting of the rule's constants, in seconds.
The chosen constants are then checked end to end with `issue-sorter replay` (docs/BENCHMARKS.md).

    .venv/bin/python bench/memory_sweep.py --model-dir DIR [--repo opencv/opencv] [--order time] [--window 150]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.paths import NLBSE  # noqa: E402  (the shared data's location, one definition)


def stream(repo: str) -> list:
    """The repository's 600 NLBSE'24 issues in time order, as `issue-sorter replay` sorts them."""
    from trainer.dataset import load_file

    examples = [e for path in ("issues_train.csv", "issues_test.csv") for e in load_file(NLBSE / path)
                if e.repo == repo]
    return sorted(examples, key=lambda e: (e.created_at is None, e.created_at or 0))


def in_order(items: list, order: str, seed: int = 42) -> list:
    """`items` (in time order) as `issue-sorter replay --order` feeds them."""
    items = list(items)
    if order == "shuffled":
        random.Random(seed).shuffle(items)
    return items


def scored(model_dir: Path, examples: list, wanted: list[int], cache: Path) -> tuple[dict, dict]:
    """The model's scores and embeddings of the issues `wanted` (by index), cached and computed once."""
    data = json.loads(cache.read_text()) if cache.exists() else {"scores": {}, "vectors": {}}
    missing = [i for i in wanted if str(i) not in data["scores"]]
    if missing:
        from core.classifier import load_classifier
        from core.issue_text import format_issue_text

        classifier = load_classifier(model_dir)
        scores, vectors = classifier.predict_and_embed([format_issue_text(examples[i].title, examples[i].body)
                                                        for i in missing])
        data["scores"].update({str(i): row for i, row in zip(missing, scores, strict=True)})
        data["vectors"].update({str(i): row for i, row in zip(missing, vectors, strict=True)})
        cache.write_text(json.dumps(data))
    return data["scores"], data["vectors"]


def simulate(scores: list[dict], vectors: np.ndarray, truths: list[str], window: int, **constants) -> list[float]:
    """Accuracy per window when issue i is scored with the memory of issues 0..i-1."""
    from core import memory

    k = constants.pop("neighbours", memory.NEIGHBOURS)
    hits = []
    for i, (row, truth) in enumerate(zip(scores, truths, strict=True)):
        if constants.get("off"):
            adjusted = row
        else:
            recalled = memory.Memory(vectors[:i], truths[:i])
            adjusted = memory.adjust_scores(row, recalled.nearest(vectors[i], k) if i else [],
                                            recalled.label_counts(), **constants)
        hits.append(max(adjusted, key=adjusted.get) == truth)
    return [float(np.mean(hits[start:start + window])) for start in range(0, len(hits), window)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--repo", default="opencv/opencv")
    parser.add_argument("--order", choices=("time", "shuffled"), default="shuffled")
    parser.add_argument("--window", type=int, default=150)
    parser.add_argument("--limit", type=int, help="only the first N issues of the order (as replay --limit)")
    args = parser.parse_args()
    examples = stream(args.repo)
    cache = args.model_dir.parent / f"scores-{args.model_dir.name}-{args.repo.replace('/', '-')}.json"
    order = in_order(range(len(examples)), args.order)[:args.limit]
    scores, vectors = scored(args.model_dir, examples, order, cache)
    scores, vectors = [scores[str(i)] for i in order], np.asarray([vectors[str(i)] for i in order], np.float32)
    truths = [examples[i].label for i in order]
    baseline = simulate(scores, vectors, truths, args.window, off=True)
    print(f"{args.repo} {args.order}, windows of {args.window}; learning off: {_fmt(baseline)}")
    grid = {"knn_weight": (0.0, 0.3, 0.5, 0.7, 1.0), "knn_ramp": (0, 20, 50), "prior_strength": (0.0, 0.5, 1.0),
            "neighbours": (5, 10, 20)}
    rows = []
    for values in itertools.product(*grid.values()):
        constants = dict(zip(grid, values, strict=True))
        curve = simulate(scores, vectors, truths, args.window, **dict(constants))
        rows.append((float(np.mean(curve[1:]) - np.mean(baseline[1:])), constants, curve))
    rows.sort(key=lambda row: -row[0])
    for gain, constants, curve in rows[:15]:
        print(f"{gain * 100:+5.1f} pts after window 1  {_fmt(curve)}  {constants}")
    from core import memory

    served = {"knn_weight": memory.KNN_WEIGHT, "knn_ramp": memory.KNN_RAMP,
              "prior_strength": memory.PRIOR_STRENGTH, "neighbours": memory.NEIGHBOURS}
    for name, keep in [("prior correction alone", lambda c: c["knn_weight"] == 0 < c["prior_strength"]),
                       ("kNN vote alone", lambda c: c["prior_strength"] == 0 < c["knn_weight"]),
                       ("the served constants", lambda c: c == served)]:
        picked = [row for row in rows if keep(row[1])]
        if picked:
            gain, constants, curve = picked[0]
            print(f"best {name}: {gain * 100:+5.1f} pts  {_fmt(curve)}  {constants}")
    return 0


def _fmt(curve: list[float]) -> str:
    return " ".join(f"{a:.3f}" for a in curve)


if __name__ == "__main__":
    sys.exit(main())
