"""Two recipes' fold blends on repositories they never saw, at every memory size: each fold's served blend
(PyTorch fp32) scores the issues of the repositories it never trained on, each issue answered alone and with
the memory of the N issues of its repository before it (time order where dated, else a seeded shuffle).
Macro-F1, accuracy and the mean per-repository macro-F1, pooled over all folds, per recipe. Run bench.unseen
with --save-fold-models for each recipe first.

    .venv/bin/python -m bench.recipe_memory_sizes --workdirs var/bench-unseen OTHER --json OUT
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from core.card import ModelCard
from core.classifier import BlendedClassifier, load_classifier
from core.encoder import TransformerClassifier
from core.memory import Memory
from trainer.evaluate import macro_f1, per_repo, top_label
from trainer.sources import load_sources, shared_dir
from trainer.unseen import make_folds


def replay_order(issues, seed: int) -> list[int]:
    by_repo: dict[str | None, list[int]] = {}
    for i, issue in enumerate(issues):
        by_repo.setdefault(issue.repo, []).append(i)
    rng, order = random.Random(seed), []
    for rows in by_repo.values():
        if all(issues[i].created_at for i in rows):
            rows.sort(key=lambda i: (issues[i].created_at, i))
        else:
            rng.shuffle(rows)
        order += rows
    return order


def answers_at(scores, vectors, issues, size: int, order: list[int]) -> list[str]:
    matrix = np.asarray(vectors, dtype=np.float32)
    seen: dict[str | None, list[int]] = {}
    answers = [""] * len(issues)
    for i in order:
        before = seen.setdefault(issues[i].repo, [])
        rows = before[-size:] if size else []
        if rows:
            memory = Memory(matrix[rows], [issues[j].label for j in rows],
                            model_labels=[top_label(scores[j]) for j in rows])
            answers[i] = top_label(memory.adjust(scores[i], matrix[i]))
        else:
            answers[i] = top_label(scores[i])
        before.append(i)
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdirs", type=Path, nargs="+", required=True)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 10, 25, 100, 400, 1000, 2000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sources = load_sources(shared_dir() / "data")
    folds = make_folds(sources, args.folds, per_group_kind=100_000, seed=42)
    result: dict = {}
    for workdir in args.workdirs:
        pooled = {n: {"truth": [], "tops": [], "repos": []} for n in args.sizes}
        for index, group in enumerate(folds.groups):
            issues = [e for e in folds.pool if e.repo in set(group)]
            fold = workdir / f"fold-{index}"
            card = ModelCard.read(fold)
            encoder = TransformerClassifier.from_directory(fold / "encoder", ModelCard.read(fold / "encoder"))
            blend = BlendedClassifier(encoder, load_classifier(fold / "tfidf"), card.tfidf_share, card=card)
            scores, vectors = blend.predict_and_embed([e.text for e in issues])
            order = replay_order(issues, args.seed)
            for n in args.sizes:
                pooled[n]["truth"] += [e.label for e in issues]
                pooled[n]["tops"] += answers_at(scores, vectors, issues, n, order)
                pooled[n]["repos"] += [e.repo for e in issues]
            print(workdir, index, flush=True)
        rows = {}
        for n, p in pooled.items():
            repos = per_repo(p["truth"], p["tops"], p["repos"])
            rows[n] = {"macro_f1": round(macro_f1(p["truth"], p["tops"], sorted(set(p["truth"]))), 4),
                       "accuracy": round(sum(t == a for t, a in zip(p["truth"], p["tops"])) / len(p["truth"]), 4),
                       "mean_repo_macro_f1": round(float(np.mean([r["macro_f1"] for r in repos.values()])), 4),
                       "per_repo": {repo: round(r["macro_f1"], 4) for repo, r in repos.items()}}
            print(workdir, n, {k: v for k, v in rows[n].items() if k != "per_repo"}, flush=True)
        result[str(workdir)] = rows
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
