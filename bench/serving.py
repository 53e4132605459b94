"""Serving speed per engine: a plain transformers pipeline (at its defaults and at the card's max_length),
each engine core.engines can choose, and what load_classifier chooses on this CPU; same model, same issues.

For each engine, in a process of its own (so peak memory is its own): load time (a cold process's imports
and model load, what a worker pays at start), backfill throughput over every issue of --issues (our paths:
length-sorted batches of --batch-size; the pipeline: its default, one at a time), single-issue latency
p50/p99 over the first --single issues one at a time, peak RSS, and the share of issues whose top label is
our PyTorch path's. Threads: --threads for torch and ONNX Runtime alike.

    .venv/bin/python -m bench.serving --model DIR [--json OUT]

DIR is a registered encoder (a version directory, or a blend's `encoder/`) whose card records its fast path.
Engines: `pipeline` is `transformers.pipeline("text-classification", model=DIR)` at its defaults plus
`truncation=True` (without it an issue over 512 tokens raises); `pipeline-128` also caps it at the card's
max_length, to tell the engine's share from the token budget's; `pytorch` and `fast` are
`core.encoder.TransformerClassifier` and what `load_classifier` serves here (core.engines: the CPU's
fastest engine its gate allowed); `pytorch-bf16` is PyTorch under CPU autocast to bfloat16; `ort-int8` and
`ort-fp32` are both artefacts, exported here into a copy (the registry keeps those its gate passed);
`ov-bf16` is OpenVINO on the fused fp32 graph in bf16, `ov-int8` OpenVINO on the static int8 graph calibrated
on --calibration's issues (the training issues' kind, never the measured ones).
The output names the CPU and its flags, and where one issue's time goes in what serves (tokenizer, engine,
TF-IDF with --tfidf, the memory's vote over a full memory); the database's write is bench/latency.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.paths import NLBSE, REPO_ROOT

ENGINES = ("pipeline", "pipeline-128", "pytorch", "pytorch-bf16", "ort-fp32", "ort-int8", "ov-bf16", "ov-int8", "fast")
DEFAULT_ENGINES = "pipeline-128,pytorch,pytorch-bf16,ort-fp32,ort-int8,ov-bf16,ov-int8,fast"
ONNX_ENGINES = {"ort-fp32": "onnxruntime-fp32", "ort-int8": "onnxruntime-int8", "ov-bf16": "openvino-bf16",
                "ov-int8": "openvino-int8"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a registered encoder's directory")
    parser.add_argument("--issues", type=Path, default=NLBSE / "issues_test.csv")
    parser.add_argument("--calibration", type=Path, default=NLBSE / "issues_train.csv",
                        help="issues static int8 calibrates on (ov-int8)")
    parser.add_argument("--single", type=int, default=300, help="issues timed one at a time")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engines", default=DEFAULT_ENGINES, help=f"some of {','.join(ENGINES)}")
    parser.add_argument("--limit", type=int, help="only the first N issues of --issues")
    parser.add_argument("--tfidf", type=Path, help="a blend's tfidf/ member: its share of one issue's time")
    parser.add_argument("--json", type=Path, help="write every figure here too")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)  # one engine, in this process
    parser.add_argument("--onnx", type=Path, help=argparse.SUPPRESS)  # the folder export_copy wrote
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args)))
        return 0
    results = run_all(args)
    print(table(results, args))
    print(cpu_line())
    if args.json:
        args.json.write_text(json.dumps(results | {"cpu": cpu_line()}, indent=2) + "\n")
    return 0


def run_all(args: argparse.Namespace) -> dict[str, dict]:
    """Each engine in a fresh subprocess, one after the other."""
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        engines, onnx = args.engines.split(","), None
        if set(ONNX_ENGINES) & set(engines):
            onnx = export_copy(args.model, Path(scratch), args.calibration if "ov-int8" in engines else None)
        for engine in engines:
            command = [sys.executable, "-m", "bench.serving", "--worker", engine, "--model", str(args.model),
                       "--issues", str(args.issues), "--single", str(args.single),
                       "--batch-size", str(args.batch_size), "--threads", str(args.threads)]
            for option, value in (("--limit", args.limit), ("--tfidf", args.tfidf), ("--onnx", onnx)):
                command += [option, str(value)] if value else []
            done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO_ROOT,
                                  env=os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
            if done.returncode:
                raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
            results[engine] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{engine}: {results[engine]['backfill_per_s']:.1f} issues/s", file=sys.stderr)
    reference = results.get("pytorch", {}).get("top")
    truth = issue_texts(args.issues, "label")[:args.limit]
    for result in results.values():
        top = result.pop("top")
        result["macro_f1"] = quality(truth, top)
        if reference:
            result["agreement"] = sum(a == b for a, b in zip(top, reference, strict=True)) / len(top)
    return results


def quality(truth: list[str], top: list[str]) -> float:
    """Macro-F1 of the top labels over the kinds the issues have (a pipeline names them as the card does)."""
    from trainer.evaluate import macro_f1

    return macro_f1(truth, top, sorted(set(truth)))


def cpu_line() -> str:
    """The CPU's model name and the flags that decide the engine (core.engines.cpu_summary)."""
    from core.engines import cpu_flags, cpu_summary

    names = [line.partition(":")[2].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")] if Path("/proc/cpuinfo").is_file() else []
    return f"CPU: {names[0] if names else 'unknown'} ({len(names)} cores), flags {cpu_summary(cpu_flags())}"


def export_copy(model: Path, scratch: Path, calibration: Path | None) -> Path:
    """Every artefact of `model`, built in a copy (the registry keeps only those whose gate passed), the
    static int8 one calibrated on `calibration`'s issues; its fast/."""
    from core.card import ModelCard
    from trainer.fast_path import export_onnx

    copy = Path(shutil.copytree(model, scratch / "model", ignore=shutil.ignore_patterns("fast")))
    texts = issue_texts(calibration) if calibration else ()
    return export_onnx(copy, calibration=texts, max_length=ModelCard.read(model).max_length)["onnxruntime-fp32"].parent


def measure(args: argparse.Namespace) -> dict:
    started = time.perf_counter()
    predict_one, predict_all, classifier = load_engine(args)
    load_seconds = time.perf_counter() - started
    texts = issue_texts(args.issues)[:args.limit]
    predict_one(texts[0])  # warm-up: the first call pays for lazy initialisation
    started = time.perf_counter()
    top = predict_all(texts)
    backfill = time.perf_counter() - started
    latencies = ms_each(predict_one, texts[:args.single])
    single_per_s = len(latencies) * 1000 / sum(latencies)
    latencies.sort()
    result = {"load_s": load_seconds, "backfill_per_s": len(texts) / backfill, "issues": len(texts),
              "single_per_s": single_per_s,
              "p50_ms": statistics.median(latencies), "p99_ms": latencies[int(0.99 * (len(latencies) - 1))],
              "peak_rss_mb": peak_rss_mb(), "top": top, "engine": getattr(classifier, "engine", args.worker)}
    if args.worker == "fast":
        result["breakdown_ms"] = breakdown(classifier, texts[:args.single], args.tfidf)
    return result


def breakdown(classifier, texts: list[str], tfidf_dir: Path | None) -> dict[str, float]:
    """Median ms per issue, one at a time, of each step an issue's scoring takes in what serves."""
    import numpy as np

    from core.classifier import load_classifier
    from core.memory import MEMORY_SIZE, Memory

    def median_ms(step) -> float:
        return statistics.median(ms_each(step, texts))

    steps = {"tokenizer": median_ms(lambda text: classifier._encode([text], "np")),
             "tokenizer + engine": median_ms(lambda text: classifier.predict_and_embed([text]))}
    if tfidf_dir:
        tfidf = load_classifier(tfidf_dir)
        steps["tfidf"] = median_ms(lambda text: tfidf.predict([text]))
    vectors = np.random.default_rng(0).normal(size=(MEMORY_SIZE, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    memory = Memory(vectors, [classifier.labels[i % len(classifier.labels)] for i in range(MEMORY_SIZE)])
    scores = dict.fromkeys(classifier.labels, 1 / len(classifier.labels))
    steps[f"memory ({MEMORY_SIZE} issues)"] = median_ms(lambda text: memory.adjust(scores, vectors[0]))
    return {name: round(ms, 2) for name, ms in steps.items()}


def peak_rss_mb() -> float:
    """This process's peak resident memory. Not getrusage's ru_maxrss: Linux keeps it across exec, so a child
    would report the parent's peak when that was higher."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ms_each(call, items: list) -> list[float]:
    """Milliseconds `call` takes on each item, one after the other (one issue at a time, as a job asks)."""
    timings = []
    for item in items:
        started = time.perf_counter()
        call(item)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def issue_texts(path: Path, field: str = "text") -> list[str]:
    from trainer.dataset import load_file

    return [getattr(example, field) for example in load_file(path)]


def load_engine(args: argparse.Namespace):
    """(one text → top label, texts → top labels) for args.worker, loaded in this process."""
    engine = args.worker
    if engine.startswith("pipeline"):
        return (*load_pipeline(args.model, args.threads, args.batch_size, capped=engine == "pipeline-128"), None)
    if engine == "fast":
        from core.classifier import load_classifier

        classifier = load_classifier(args.model, threads=args.threads)
    elif engine in ONNX_ENGINES:
        from core.card import ModelCard
        from core.encoder import OnnxClassifier, OpenVinoClassifier
        from core.engines import FAST_FILE, FP32_FILE, STATIC_INT8_FILE

        path = args.onnx / {"ort-int8": FAST_FILE, "ov-int8": STATIC_INT8_FILE}.get(engine, FP32_FILE)
        runner = OpenVinoClassifier if engine.startswith("ov-") else OnnxClassifier
        classifier = runner.from_file(args.model, path, ModelCard.read(args.model), threads=args.threads,
                                      engine=ONNX_ENGINES[engine])
    else:
        import torch

        from core.card import ModelCard
        from core.encoder import TransformerClassifier

        torch.set_num_threads(args.threads)
        classifier = TransformerClassifier.from_directory(args.model, ModelCard.read(args.model), device="cpu",
                                                          bf16=engine == "pytorch-bf16")

    def top(rows):
        return [max(row, key=row.get) for row in rows]

    return (lambda text: top(classifier.predict([text]))[0],
            lambda texts: top(classifier.predict(texts, batch_size=args.batch_size)), classifier)


def load_pipeline(model: Path, threads: int, batch_size: int, *, capped: bool):
    import torch
    from transformers import pipeline

    from core.card import ModelCard

    torch.set_num_threads(threads)
    classify = pipeline("text-classification", model=str(model))
    options = {"truncation": True} | ({"max_length": ModelCard.read(model).max_length} if capped else {})
    return (lambda text: classify(text, **options)[0]["label"],
            lambda texts: [row["label"] for row in classify(texts, batch_size=batch_size, **options)])


def agreement(result: dict) -> str:
    """The engine's top labels against the PyTorch path's, or why there is no figure."""
    return f"{result['agreement']:.1%}" if "agreement" in result else "n/a (pytorch not run)"


def table(results: dict[str, dict], args: argparse.Namespace) -> str:
    """One row per engine, its ratios to the pipeline at its defaults and at the card's max_length."""
    bases = [(name, results[name]) for name in ("pipeline", "pipeline-128") if name in results]
    ratios = "".join(f" | batch {args.batch_size} vs {name} | one at a time vs {name}" for name, _ in bases)
    lines = [(f"| engine | load (s) | batch {args.batch_size} (issues/s) | one at a time (issues/s) | "
              f"single p50 (ms) | p99 (ms){ratios} | peak RSS (MB) | top label = PyTorch path's | macro-F1 |"),
             "|---" * (9 + 2 * len(bases)) + "|"]
    for engine, r in results.items():
        speedups = "".join(f" | {r['backfill_per_s'] / base['backfill_per_s']:.2f}x | "
                           f"{r['single_per_s'] / base['single_per_s']:.2f}x" for _, base in bases)
        lines.append(f"| {engine} | {r['load_s']:.1f} | {r['backfill_per_s']:.1f} | {r['single_per_s']:.1f} | "
                     f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f}{speedups} | {r['peak_rss_mb']:.0f} | "
                     f"{agreement(r)} | {r['macro_f1']:.4f} |")
    first = next(iter(results.values()))
    if "fast" in results:
        lines.append(f"\nfast = {results['fast']['engine']}, what load_classifier chooses on this CPU for this "
                     f"model; one issue's steps (median ms): {results['fast']['breakdown_ms']}")
    lines.append(f"\n{first['issues']} issues ({args.issues.name}), {args.single} timed one at a time, "
                 f"batch {args.batch_size}, {args.threads} threads")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
