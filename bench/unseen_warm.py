"""The unseen protocol after a repository's first confirmed issues: what the memory adds on repositories
the model never saw, from bench/unseen.py's out-of-fold scores and embeddings (no model is run here).

Each repository's scored issues come in a seeded shuffled order; every issue is scored by the served blend
(its fold's models, TF-IDF share `--share`), then adjusted by the memory of the issues before it, each
confirmed with its true kind (`core.memory.Memory`: its fold's encoder's embeddings, the served constants).
For k confirmed issues, the table scores the issues after the first k of each repository that has at
least k + `--min-rest` of them: the mean over those repositories of macro-F1 (kinds each has), with the
memory and without it, on the same issues.

    .venv/bin/python bench/unseen_warm.py [--workdir var/bench-unseen] [--share 0.7]

Writes <out>/unseen-warm.json, .md and .png (out: docs/quality).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.charts import finish
from bench.quality import run_record, write_report

CONFIRMED = (0, 5, 10, 25, 50)


def replay_repositories(pool: list[dict], scores: list[dict], vectors, seed: int) -> dict[str, list[tuple]]:
    """repository → [(truth, cold prediction, warm prediction)] in its replay order."""
    from core.memory import Memory
    from trainer.evaluate import top_label

    by_repo: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(pool):
        by_repo[row["repo"]].append(i)
    rng = random.Random(seed)
    replays = {}
    for repo in sorted(by_repo):
        order = by_repo[repo][:]
        rng.shuffle(order)
        rows, seen = [], []
        for i in order:
            memory = Memory(_rows(vectors, seen), [pool[j]["label"] for j in seen])
            warm = memory.adjust(scores[i], vectors[i]) if seen else scores[i]
            rows.append((pool[i]["label"], top_label(scores[i]), top_label(warm)))
            seen.append(i)
        replays[repo] = rows
    return replays


def _rows(vectors, indices):
    import numpy as np

    block = vectors[indices] if indices else np.zeros((0, vectors.shape[1]), dtype=np.float32)
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    return block / np.where(norms == 0, 1, norms)


def table(replays: dict[str, list[tuple]], min_rest: int) -> list[dict]:
    """For each k of CONFIRMED: mean per-repository macro-F1 of the issues after the first k, cold and warm."""
    from trainer.evaluate import per_repo

    rows = []
    for k in CONFIRMED:
        kept = {repo: rows_[k:] for repo, rows_ in replays.items() if len(rows_) >= k + min_rest}
        if not kept:  # no repository has that many issues scored
            continue
        truth = [t for rest in kept.values() for t, _, _ in rest]
        repos = [repo for repo, rest in kept.items() for _ in rest]
        result = {}
        for name, column in (("cold", 1), ("warm", 2)):
            predicted = [row[column] for rest in kept.values() for row in rest]
            parts = per_repo(truth, predicted, repos)
            result[name] = round(sum(p["macro_f1"] for p in parts.values()) / len(parts), 4)
        rows.append({"confirmed": k, "repositories": len(kept), "issues": len(truth), **result,
                     "gain": round(result["warm"] - result["cold"], 4)})
    return rows


def plot(rows: list[dict], path: Path, share: float) -> Path:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), dpi=120)
    axes = figure.add_subplot()
    ks = [row["confirmed"] for row in rows]
    axes.plot(ks, [row["cold"] for row in rows], marker="o", color="#6e7781", label="the global model alone")
    axes.plot(ks, [row["warm"] for row in rows], marker="o", color="#0969da", label="with the memory")
    axes.axhline(0.78, color="#cf222e", linestyle=":", linewidth=1, label="issue 18's unseen target")
    return finish(figure, axes, path, title=f"Repositories never trained on, served blend (TF-IDF share {share:g})",
                  xlabel="issues of the repository its maintainers confirmed so far",
                  ylabel="mean per-repository macro-F1 of the rest")


def out_of_fold_arguments(parser: argparse.ArgumentParser) -> None:
    """--workdir (bench/unseen.py's out-of-fold run), --share (the served blend's), --seed and --out."""
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-unseen",
                        help="where bench/unseen.py wrote unseen-oof.json and unseen-embeddings.npy")
    parser.add_argument("--share", type=float, default=0.7, help="TF-IDF share of the served blend")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")


def served_out_of_fold(workdir: Path, share: float):
    """(the scored pool, each issue's served blend scores, its fold's encoder embedding)."""
    import numpy as np

    from core.classifier import blend_scores

    oof = json.loads((workdir / "unseen-oof.json").read_text())
    vectors = np.load(workdir / "unseen-embeddings.npy")
    return oof["pool"], blend_scores(oof["scores"]["encoder"], oof["scores"]["tfidf"], share), vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    out_of_fold_arguments(parser)
    parser.add_argument("--min-rest", type=int, default=20, help="issues a repository must have after the k")
    args = parser.parse_args()
    started = time.perf_counter()
    pool, scores, vectors = served_out_of_fold(args.workdir, args.share)
    rows = table(replay_repositories(pool, scores, vectors, args.seed), args.min_rest)
    result = run_record("unseen_warm.py", {"wall_minutes": round((time.perf_counter() - started) / 60, 1),
                                           "share": args.share, "min_rest": args.min_rest, "rows": rows})
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, args.out / "unseen-warm.png", args.share)
    lines = [f"Unseen repositories after their first confirmed issues (served blend, TF-IDF share {args.share:g}; "
             "memory: core.memory with the served constants)", "",
             "| confirmed issues k | repositories | issues after the k | model alone | with the memory | gain |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['confirmed']} | {r['repositories']} | {r['issues']} | {r['cold']:.4f} | {r['warm']:.4f} | "
              f"{r['gain']:+.4f} |" for r in rows]
    return write_report(args.out, "unseen-warm", result, "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
