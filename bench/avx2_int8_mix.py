"""Scratch (deleted once its answer is in docs/BENCHMARKS.md): ONNX Runtime dynamic int8 with some layers
kept in fp32, each variant's speed and gate, to find what int8 keeps on an AVX2-only CPU when its answers
must stay PyTorch's.

    .venv/bin/python -m bench.avx2_int8_mix --model var/models/<version> --work /tmp/avx2
(--work as bench.avx2_engines left it: the fused fp32 graph and the reference answers)
"""

from __future__ import annotations

import argparse
import logging
import pickle
import time
from pathlib import Path

import onnx

from tests.paths import NLBSE

LAYERS = range(6)


def names(graph: onnx.ModelProto, *, kinds=(), layers=(), heads=False) -> list[str]:
    chosen = []
    for node in graph.graph.node:
        if node.op_type == "Gemm" and heads:
            chosen.append(node.name)
        for layer in layers:
            if node.name == f"Attention_{layer}" and "qkv" in kinds or (
                    f"layer.{layer}/" in node.name and any(f"/{kind}/" in node.name for kind in kinds)):
                chosen.append(node.name)
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--only")
    args = parser.parse_args()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from core.card import ModelCard
    from core.encoder import OnnxClassifier
    from trainer.dataset import load_file
    from trainer.fast_path import _as_served, default_gate_issues, same_answers, served_answers

    fused = args.work / "encoder" / "fast" / "model.fp32.onnx"
    graph = onnx.load(str(fused))
    every = ("qkv", "attention", "intermediate", "output")
    variants = {
        "all int8": [],
        "heads fp32": names(graph, heads=True),
        "FFN out fp32": names(graph, kinds=("output",), layers=LAYERS),
        "FFN in fp32": names(graph, kinds=("intermediate",), layers=LAYERS),
        "QKV fp32": names(graph, kinds=("qkv",), layers=LAYERS),
        "attention out fp32": names(graph, kinds=("attention",), layers=LAYERS),
        "layer 5 fp32": names(graph, kinds=every, layers=(5,)),
        "layer 0 fp32": names(graph, kinds=every, layers=(0,)),
        "layers 0, 5 fp32": names(graph, kinds=every, layers=(0, 5)),
        "layers 4, 5 fp32": names(graph, kinds=every, layers=(4, 5)),
    }
    # the "output" kind matches attention/output too: keep only the FFN's
    variants["FFN out fp32"] = [n for n in variants["FFN out fp32"] if "/attention/" not in n]
    card = ModelCard.read(args.work / "encoder")
    as_served, _ = _as_served(args.model, ModelCard.read(args.model))
    issues = default_gate_issues()[0]
    reference = pickle.loads((args.work / "reference.pickle").read_bytes())
    texts = [example.text for example in load_file(NLBSE / "issues_test.csv")]
    for name, excluded in variants.items():
        if args.only and name not in args.only.split(","):
            continue
        target = args.work / "mix.onnx"
        logging.disable(logging.WARNING)
        quantize_dynamic(fused, target, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         nodes_to_exclude=excluded)
        logging.disable(logging.NOTSET)
        classifier = OnnxClassifier.from_file(args.work / "encoder", target, card, threads=2)
        classifier.predict([texts[0]])
        started = time.perf_counter()
        classifier.predict(texts, batch_size=32)
        batch = len(texts) / (time.perf_counter() - started)
        started = time.perf_counter()
        for text in texts[:150]:
            classifier.predict([text])
        single = 150 / (time.perf_counter() - started)
        gate = same_answers(reference, served_answers(as_served(classifier), issues), issues, classifier.labels)
        print(f"{name:20s} ({len(excluded):2d} fp32) batch {batch:5.1f}/s single {single:5.1f}/s alone "
              f"{gate['top_label_agreement']:.4f} memory {gate['memory_agreement']:.4f} passed {gate['passed']}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
