"""OpenVINO bf16's answers against fp32 PyTorch on repositories its model never saw, at every memory size:
each fold's served blend scores the issues of the repositories it never trained on once per engine, then
each issue is answered alone and with the memory of the N issues of its repository before it (an install
growing: time order where the issues have dates, else a seeded shuffle), N in --sizes. Agreement (the
gate's rule), macro-F1 and accuracy both ways, per fold and per repository. Run bench.unseen with
--save-fold-models first.

    .venv/bin/python -m bench.engine_unseen_sizes --workdir var/bench-unseen --folds 3 --json OUT
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from core.card import ModelCard
from core.classifier import BlendedClassifier, load_classifier
from core.encoder import TransformerClassifier, graph_classifier
from core.engines import OV_BF16
from core.memory import Memory
from trainer.evaluate import macro_f1, per_repo, top_label
from trainer.fast_path import export_onnx
from trainer.sources import load_sources, shared_dir
from trainer.unseen import make_folds


def replay_order(issues, seed: int) -> list[int]:
    """Every issue's index, each repository's in time order where all its issues have dates, else in a
    seeded shuffle (Ticket Tagger's file and ccims' come sorted by kind: their input order would fill the
    memory with the issue's own kind)."""
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
    """Each issue's top label with the memory of up to `size` issues of its repository before it in `order`."""
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


def figures(truth, reference, fast, labels, repos) -> dict:
    agree = sum(a == b for a, b in zip(reference, fast)) / len(truth)
    accuracy = lambda tops: sum(t == p for t, p in zip(truth, tops)) / len(truth)  # noqa: E731
    torch_repo, fast_repo = per_repo(truth, reference, repos), per_repo(truth, fast, repos)
    deltas = {repo: round(fast_repo[repo]["macro_f1"] - row["macro_f1"], 4) for repo, row in torch_repo.items()}
    return {"agreement": round(agree, 4),
            "macro_f1": [round(macro_f1(truth, reference, labels), 4), round(macro_f1(truth, fast, labels), 4)],
            "accuracy": [round(accuracy(reference), 4), round(accuracy(fast), 4)],
            "mean_repo_macro_f1": [round(float(np.mean([r["macro_f1"] for r in torch_repo.values()])), 4),
                                   round(float(np.mean([r["macro_f1"] for r in fast_repo.values()])), 4)],
            "worst_repo_delta": min(deltas.items(), key=lambda kv: kv[1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 10, 25, 100, 400, 1000, 2000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the replay order of undated repositories")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sources = load_sources(shared_dir() / "data")
    folds = make_folds(sources, args.folds, per_group_kind=100_000, seed=42)
    result: dict = {"sizes": args.sizes, "folds": {}}
    pooled: dict[int, dict[str, list]] = {n: {"truth": [], "ref": [], "fast": [], "repos": []} for n in args.sizes}
    for index, group in enumerate(folds.groups):
        issues = [e for e in folds.pool if e.repo in set(group)]
        fold = args.workdir / f"fold-{index}"
        card, encoder_dir = ModelCard.read(fold), fold / "encoder"
        encoder_card = ModelCard.read(encoder_dir)
        graphs = export_onnx(encoder_dir)
        tfidf = load_classifier(fold / "tfidf")
        texts = [e.text for e in issues]
        started = time.perf_counter()
        ref_scores, ref_vectors = BlendedClassifier(
            TransformerClassifier.from_directory(encoder_dir, encoder_card), tfidf, card.tfidf_share,
            card=card).predict_and_embed(texts)
        mid = time.perf_counter()
        fast_scores, fast_vectors = BlendedClassifier(
            graph_classifier(encoder_dir, graphs[OV_BF16], encoder_card, OV_BF16, threads=args.threads), tfidf,
            card.tfidf_share, card=card).predict_and_embed(texts)
        print(f"fold {index}: {len(issues)} issues, pytorch {mid - started:.0f} s, "
              f"openvino-bf16 {time.perf_counter() - mid:.0f} s", flush=True)
        truth, repos = [e.label for e in issues], [e.repo for e in issues]
        order = replay_order(issues, args.seed)
        result["folds"][index] = {}
        for n in args.sizes:
            reference = answers_at(ref_scores, ref_vectors, issues, n, order)
            fast = answers_at(fast_scores, fast_vectors, issues, n, order)
            result["folds"][index][n] = figures(truth, reference, fast, card.labels, repos)
            for key, values in (("truth", truth), ("ref", reference), ("fast", fast), ("repos", repos)):
                pooled[n][key] += values
            print(n, json.dumps(result["folds"][index][n]), flush=True)
    result["all"] = {n: figures(p["truth"], p["ref"], p["fast"], sorted(set(p["truth"])), p["repos"])
                     for n, p in pooled.items()}
    for n, row in result["all"].items():
        print("all", n, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
