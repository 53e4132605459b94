"""An engine's answers against fp32 PyTorch on repositories its model never saw, by the gate's rule
(trainer.fast_path.same_answers): the served blend's top labels alone and with the memory (each issue's
repository's other issues, leave-one-out, its last MEMORY_SIZE in input order). Run bench.unseen with
--save-fold-models first; each fold's blend scores the pool issues of the repositories it never trained on.

    .venv/bin/python -m bench.engine_unseen --workdir var/bench-unseen --folds 3 [--engine openvino-bf16]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from core.card import ModelCard
from core.classifier import BlendedClassifier, load_classifier
from core.encoder import TransformerClassifier, graph_classifier
from core.engines import OV_BF16, TABLE
from trainer.evaluate import per_repo
from trainer.fast_path import export_onnx, same_answers, served_answers
from trainer.sources import load_sources, shared_dir
from trainer.unseen import make_folds


def fold_verdict(fold: Path, issues: list, engine: str, threads: int) -> dict:
    """The engine's verdict on `issues` with the fold's blend, and each repository's macro-F1 both ways."""
    card, encoder_dir = ModelCard.read(fold), fold / "encoder"
    encoder_card = ModelCard.read(encoder_dir)
    graphs = export_onnx(encoder_dir)
    tfidf = load_classifier(fold / "tfidf")
    reference_encoder = TransformerClassifier.from_directory(encoder_dir, encoder_card)
    fast_encoder = graph_classifier(encoder_dir, graphs[engine], encoder_card, engine, threads=threads)
    started = time.perf_counter()
    reference = served_answers(BlendedClassifier(reference_encoder, tfidf, card.tfidf_share, card=card), issues)
    reference_seconds, started = time.perf_counter() - started, time.perf_counter()
    fast = served_answers(BlendedClassifier(fast_encoder, tfidf, card.tfidf_share, card=card), issues)
    verdict = same_answers(reference, fast, issues, card.labels)
    verdict["seconds"] = [round(reference_seconds, 1), round(time.perf_counter() - started, 1)]
    truth, repos = [e.label for e in issues], [e.repo for e in issues]
    for name, answers in (("pytorch", reference), ("fast", fast)):
        for suffix, tops in (("", answers.model), ("_memory", answers.with_memory)):
            verdict[f"per_repo_{name}{suffix}"] = {repo: round(row["macro_f1"], 4)
                                                   for repo, row in per_repo(truth, tops, repos).items()}
    return verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="bench.unseen's --workdir")
    parser.add_argument("--folds", type=int, default=3, help="bench.unseen's --folds")
    parser.add_argument("--engine", default=OV_BF16, choices=[name for name, e in TABLE.items() if e.graph])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sources = load_sources(shared_dir() / "data")
    folds = make_folds(sources, args.folds, per_group_kind=100_000, seed=42)  # every issue, as the run scored
    result = {}
    for index, group in enumerate(folds.groups):
        issues = [e for e in folds.pool if e.repo in set(group)]
        result[f"fold-{index}"] = fold_verdict(args.workdir / f"fold-{index}", issues, args.engine, args.threads)
        print(json.dumps(result[f"fold-{index}"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
