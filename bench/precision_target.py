"""A repository's own thresholds on repositories never trained on: the precision and coverage of its later
issues after its first history issues, from bench/unseen.py's out-of-fold scores and embeddings.

Each repository with at least `--history` + `--min-rest` scored issues is replayed in time order (seeded
shuffle where the pool has no dates). Its first `--history` issues are its history in the memory, each
scored as the bot would have served it without itself (core.repository_thresholds.leave_one_out); the
thresholds come from them (core.thresholds.kind_thresholds: its own from MIN_SUPPORT predictions of a
kind, else the global one). The global thresholds are what a registration measures: the lowest per kind
that reaches the target on the other repositories' model scores. Every later issue is served as the bot
serves it, the memory adjusted by all confirmed issues before it, and labelled when its top score reaches
its kind's threshold. Rows: own thresholds (fixed after the history, or refreshed every `--refresh` issues
with the later ones judged too), the global thresholds alone, and the App's flat 0.5.

    .venv/bin/python -m bench.precision_target [--workdir var/bench-unseen] [--share 0.5] [--history 100]

Writes <out>/precision-target.json and .md (out: docs/quality).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench.quality import run_record, write_report
from bench.unseen import add_out_of_fold_arguments, is_repository, served_out_of_fold

REPO_ROOT = Path(__file__).resolve().parents[1]

APP_THRESHOLD = 0.5


def replay_order(pool: list[dict], seed: int) -> dict[str, list[int]]:
    """repository → its issues' indices in time order (seeded shuffle without dates)."""
    by_repo: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(pool):
        if is_repository(row["repo"]):  # not Ticket Tagger's group of many repositories
            by_repo[row["repo"]].append(i)
    rng = random.Random(seed)
    for indices in by_repo.values():
        if all(pool[i].get("created_at") for i in indices):
            indices.sort(key=lambda i: (pool[i]["created_at"], i))
        else:
            rng.shuffle(indices)
    return dict(by_repo)


def served_in_order(order: list[int], scores: list[dict], labels: list[str], vectors) -> list[dict]:
    """Each issue's scores as the bot serves it: adjusted by the memory of every issue before it."""
    from core.memory import MEMORY_SIZE, Memory, model_label

    block, served = vectors[order], []
    model_labels = [model_label(scores[i], list(scores[i])) for i in order]  # the self-check's reference
    for position, i in enumerate(order):
        start = max(0, position - MEMORY_SIZE)
        memory = Memory(block[start:position], [labels[j] for j in order[start:position]],
                        model_labels=model_labels[start:position])
        served.append(memory.adjust(scores[i], block[position]) if position else dict(scores[i]))
    return served


def history_judged(order: list[int], scores: list[dict], labels: list[str], vectors) -> list:
    """The history's issues as repository_thresholds scores them: leave-one-out inside the memory."""
    from core.memory import Memory, model_label
    from core.repository_thresholds import leave_one_out
    from core.thresholds import Judged

    classes = list(scores[order[0]])
    raw = [{c: scores[i][c] for c in classes} for i in order]
    history = [labels[i] for i in order]
    trust = Memory(vectors[order], history, model_labels=[model_label(row, classes) for row in raw]).trust
    served = leave_one_out(vectors[order], history, range(len(order)), raw, trust=trust)
    return [Judged(row, labels[i]) for row, i in zip(served, order, strict=True)]


def global_thresholds(pool: list[dict], scores: list[dict], repo: str, classes: list[str], target: float) -> dict:
    """Per kind, the registration's rule on every other repository's model scores."""
    from core.thresholds import Judged, kind_thresholds

    others = [Judged(scores[i], row["label"]) for i, row in enumerate(pool) if row["repo"] != repo]
    found = kind_thresholds(others, classes, target, {}, APP_THRESHOLD, min_support=1)
    return {kind: row.threshold for kind, row in found.items() if row.source != "default"}


def labelled(served: list[dict], truth: list[str], thresholds: list[dict]) -> tuple[int, int]:
    """(labelled, right) when issue j is labelled at thresholds[j]."""
    count = right = 0
    for row, t, at in zip(served, truth, thresholds, strict=True):
        kind = max(row, key=row.get)
        if row[kind] >= at.get(kind, APP_THRESHOLD):
            count += 1
            right += kind == t
    return count, right


def one_repository(repo: str, order: list[int], pool, scores, vectors, args, global_at: dict) -> dict:
    from core.thresholds import Judged, kind_thresholds

    labels = [row["label"] for row in pool]
    classes = list(scores[order[0]])
    history, later = order[:args.history], order[args.history:]
    served = served_in_order(order, scores, labels, vectors)[args.history:]
    truth = [labels[i] for i in later]
    judged = history_judged(history, scores, labels, vectors)

    def own(rows, min_support):
        found = kind_thresholds(rows, classes, args.target, global_at, APP_THRESHOLD, min_support=min_support)
        return {kind: row.threshold for kind, row in found.items() if row.source != "default"}

    rows = {f"own, min support {m}": [own(judged, m)] * len(later) for m in args.min_support}
    refreshed, current = [], own(judged, args.min_support[0])
    for j in range(len(later)):  # the later issues join the judged ones as the bot serves and they confirm them
        if j and j % args.refresh == 0:
            current = own(judged + [Judged(s, t) for s, t in zip(served[:j], truth[:j], strict=True)],
                          args.min_support[0])
        refreshed.append(current)
    rows[f"own, min support {args.min_support[0]}, refreshed every {args.refresh}"] = refreshed
    rows["global thresholds (the card's)"] = [global_at] * len(later)
    rows[f"flat {APP_THRESHOLD}"] = [{}] * len(later)
    return {name: labelled(served, truth, at) for name, at in rows.items()} | {"_later": len(later)}


def summarise(per_repo: dict[str, dict]) -> list[dict]:
    names = [name for name in next(iter(per_repo.values())) if name != "_later"]
    rows = []
    for name in names:
        issues = sum(result["_later"] for result in per_repo.values())
        count = sum(result[name][0] for result in per_repo.values())
        right = sum(result[name][1] for result in per_repo.values())
        precisions = [r[name][1] / r[name][0] for r in per_repo.values() if r[name][0]]
        coverages = [r[name][0] / r["_later"] for r in per_repo.values()]
        met = sum(r[name][0] and r[name][1] / r[name][0] >= 0.9 and r[name][0] / r["_later"] >= 0.7
                  for r in per_repo.values())
        rows.append({"thresholds": name, "issues": issues, "labelled": count,
                     "precision": round(right / count, 4) if count else None,
                     "coverage": round(count / issues, 4),
                     "mean_repo_precision": round(sum(precisions) / len(precisions), 4) if precisions else None,
                     "mean_repo_coverage": round(sum(coverages) / len(coverages), 4),
                     "repositories_meeting_target": met})
    return rows


def main() -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_of_fold_arguments(parser)
    parser.add_argument("--seed", type=int, default=42, help="the order of repositories without dates")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    parser.add_argument("--history", type=int, default=100, help="a repository's history issues")
    parser.add_argument("--min-rest", type=int, default=50, help="later issues a repository must have")
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--min-support", type=int, nargs="+", default=[20, 10, 30],
                        help="the first is the served one (core.thresholds.MIN_SUPPORT)")
    parser.add_argument("--refresh", type=int, default=25, help="later issues between recomputations")
    args = parser.parse_args()
    started = time.perf_counter()
    pool, scores, vectors = served_out_of_fold(args.workdir, args.share)
    vectors = vectors / np.where((norms := np.linalg.norm(vectors, axis=1, keepdims=True)) == 0, 1, norms)
    classes = sorted(scores[0])
    per_repo, orders = {}, replay_order(pool, args.seed)
    for repo, order in sorted(orders.items()):
        if len(order) < args.history + args.min_rest:
            continue
        per_repo[repo] = one_repository(repo, order, pool, scores, vectors, args,
                                        global_thresholds(pool, scores, repo, classes, args.target))
        print(repo, per_repo[repo], flush=True)
    rows = summarise(per_repo)
    in_time = [repo for repo in per_repo if all(pool[i].get("created_at") for i in orders[repo])]
    result = run_record("precision_target.py", {
        "wall_minutes": round((time.perf_counter() - started) / 60, 1), "share": args.share,
        "history": args.history, "target": args.target, "in_time_order": in_time,
        "repositories": sorted(per_repo), "rows": rows,
        "per_repository": per_repo})
    lines = [f"Repositories never trained on, after {args.history} history issues (served blend, TF-IDF share "
             f"{args.share:g}; target {args.target:g}; {len(per_repo)} repositories with at least "
             f"{args.min_rest} later issues, {len(in_time)} of them replayed in time order, the others shuffled)", "",
             "| thresholds | later issues | labelled | precision | coverage | mean per repo: precision | "
             "coverage | repos at ≥ 0.90 and ≥ 70 % |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['thresholds']} | {r['issues']} | {r['labelled']} | {_fmt(r['precision'])} | "
              f"{r['coverage']:.1%} | {_fmt(r['mean_repo_precision'])} | {r['mean_repo_coverage']:.1%} | "
              f"{r['repositories_meeting_target']} |" for r in rows]
    return write_report(args.out, "precision-target", result, "\n".join(lines) + "\n")


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
