"""Scratch (deleted once its answer is in docs/BENCHMARKS.md): engines for a CPU with AVX2 only, each timed
in a process of its own and gated as a registration gates (the served blend's answers against fp32 PyTorch's,
alone and with the memory), on the model given.

    .venv/bin/python -m bench.avx2_engines --model var/models/<version> --work /tmp/avx2
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.paths import NLBSE, REPO_ROOT

CANDIDATES = ("ort-fp32", "ort-int8", "ov-fp32", "ov-wc8", "ov-wc8-dq32", "ov-wc8-dq64", "ov-wc8-dq384",
              "ov-nncf-int8", "ov-nncf-int8-sq")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--single", type=int, default=300)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args)))
        return 0
    build(args)
    results = {}
    for candidate in args.candidates.split(","):
        command = [sys.executable, "-m", "bench.avx2_engines", "--model", str(args.model), "--work", str(args.work),
                   "--threads", str(args.threads), "--single", str(args.single), "--worker", candidate]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO_ROOT,
                              env=os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        if done.returncode:
            print(f"{candidate} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        results[candidate] = json.loads(done.stdout.strip().splitlines()[-1])
        r = results[candidate]
        print(f"{candidate:16s} batch {r['backfill_per_s']:6.1f}/s  single {r['single_per_s']:6.1f}/s "
              f"p50 {r['p50_ms']:5.1f} ms  alone {r['gate']['top_label_agreement']:.4f} memory "
              f"{r['gate']['memory_agreement']:.4f} f1 {r['gate']['macro_f1_fast']:.4f}/"
              f"{r['gate']['macro_f1_pytorch']:.4f} passed {r['gate']['passed']}", flush=True)
    (args.work / "results.json").write_text(json.dumps(results, indent=1))
    return 0


def encoder_dir(model: Path) -> Path:
    return model / "encoder" if (model / "encoder").is_dir() else model


def build(args: argparse.Namespace) -> None:
    """Every graph, in args.work, once; the reference answers, once."""
    from core.card import ModelCard
    from trainer.dataset import load_file
    from trainer.fast_path import _as_served, default_gate_issues, export_fp32, export_onnx, served_answers

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "encoder"
    if not (copy / "fast").is_dir():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(encoder_dir(args.model), copy, ignore=shutil.ignore_patterns("fast"))
        texts = [example.text for example in load_file(NLBSE / "issues_train.csv")]
        export_onnx(copy, calibration=texts, max_length=ModelCard.read(copy).max_length)
        export_fp32(copy, work / "exported.onnx")
    if not (work / "reference.pickle").is_file():
        from core.encoder import TransformerClassifier

        as_served, _ = _as_served(args.model, ModelCard.read(args.model))
        pytorch = TransformerClassifier.from_directory(copy, ModelCard.read(copy), device="cpu")
        issues = default_gate_issues()[0]
        (work / "reference.pickle").write_bytes(pickle.dumps(served_answers(as_served(pytorch), issues)))
    import nncf
    import openvino

    core = openvino.Core()
    if not (work / "wc8.xml").is_file():
        model = nncf.compress_weights(core.read_model(str(copy / "fast" / "model.fp32.onnx")),
                                      mode=nncf.CompressWeightsMode.INT8_ASYM)
        openvino.save_model(model, str(work / "wc8.xml"), compress_to_fp16=False)
    for name, smooth in (("nncf-int8", None), ("nncf-int8-sq", 0.5)):
        if (work / f"{name}.xml").is_file():
            continue
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters

        feeds = calibration_feeds(copy, core.read_model(str(work / "exported.onnx")))
        advanced = None if smooth is None else AdvancedQuantizationParameters(
            smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=smooth))
        model = nncf.quantize(core.read_model(str(work / "exported.onnx")), nncf.Dataset(feeds),
                              model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds),
                              advanced_parameters=advanced)
        openvino.save_model(model, str(work / f"{name}.xml"), compress_to_fp16=False)


def calibration_feeds(encoder: Path, model) -> list[dict]:
    import numpy as np
    from transformers import PreTrainedTokenizerFast

    from trainer.dataset import load_file
    from trainer.static_int8 import calibration_sample

    tokenizer = PreTrainedTokenizerFast.from_pretrained(encoder)
    texts = calibration_sample([example.text for example in load_file(NLBSE / "issues_train.csv")], 300)
    names = [graph_input.any_name for graph_input in model.inputs]
    feeds = []
    for text in texts:
        encoded = tokenizer([text], truncation=True, max_length=128, return_tensors="np")
        feeds.append({name: encoded[name].astype(np.int64) if name in encoded else
                      np.zeros_like(encoded["input_ids"], dtype=np.int64) for name in names})
    return feeds


def load(args: argparse.Namespace):
    from core.card import ModelCard
    from core.encoder import OnnxClassifier, OpenVinoClassifier
    from transformers import PreTrainedTokenizerFast

    work, name = args.work, args.worker
    copy = work / "encoder"
    card = ModelCard.read(copy)
    if name.startswith("ort-"):
        path = copy / "fast" / ("model.int8.onnx" if name == "ort-int8" else "model.fp32.onnx")
        return OnnxClassifier.from_file(copy, path, card, threads=args.threads, engine=name)
    import openvino

    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": args.threads,
              "INFERENCE_PRECISION_HINT": "f32"}
    if name == "ov-fp32":
        path = copy / "fast" / "model.fp32.onnx"
    elif name.startswith("ov-wc8"):
        path = work / "wc8.xml"
        group = name.rpartition("-dq")[2] if "-dq" in name else "0"
        config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = int(group)
    else:
        path = work / f"{name.removeprefix('ov-')}.xml"
    compiled = openvino.Core().compile_model(str(path), "CPU", config)
    return OpenVinoClassifier(compiled, PreTrainedTokenizerFast.from_pretrained(copy), card, path, name)


def measure(args: argparse.Namespace) -> dict:
    from core.card import ModelCard
    from trainer.dataset import load_file
    from trainer.fast_path import _as_served, default_gate_issues, same_answers, served_answers

    classifier = load(args)
    texts = [example.text for example in load_file(NLBSE / "issues_test.csv")]
    classifier.predict([texts[0]])
    best_batch = 0.0
    for _ in range(2):
        started = time.perf_counter()
        classifier.predict(texts, batch_size=32)
        best_batch = max(best_batch, len(texts) / (time.perf_counter() - started))
    timings = []
    for text in texts[:args.single]:
        started = time.perf_counter()
        classifier.predict([text])
        timings.append((time.perf_counter() - started) * 1000)
    as_served, _ = _as_served(args.model, ModelCard.read(args.model))
    issues = default_gate_issues()[0]
    reference = pickle.loads((args.work / "reference.pickle").read_bytes())
    gate = same_answers(reference, served_answers(as_served(classifier), issues), issues, classifier.labels)
    return {"backfill_per_s": best_batch, "single_per_s": len(timings) * 1000 / sum(timings),
            "p50_ms": statistics.median(timings), "gate": gate}


if __name__ == "__main__":
    raise SystemExit(main())
