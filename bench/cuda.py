"""Training and inference on CUDA beside the same machine's CPU, or a registered model as a worker serves it.

    python -m bench.cuda [--data DIR] [--base-model DIR] [--devices cuda,cpu] [--json FILE]
    python -m bench.cuda --served MODEL_DIR [--data DIR] [--json FILE]

The encoder's recipe trained per device with one seed, scored on NLBSE'24's test issues (batched and one
at a time); `--served`: each engine a worker could load. Without CUDA only the CPU runs. Results:
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
from pathlib import Path

from bench.serving import cpu_line, ms_each
from tests.paths import NLBSE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=NLBSE, help="a folder with issues_train.csv, issues_test.csv")
    parser.add_argument("--base-model", help="the encoder to fine-tune (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--devices", default="cuda,cpu", help="comma-separated; cuda is skipped where torch sees none")
    parser.add_argument("--max-steps", type=int, help="stop training after this many steps (a smoke run)")
    parser.add_argument("--single", type=int, default=100, help="test issues scored one at a time, per device")
    parser.add_argument("--served", type=Path, help="a registered model's directory: score it as a worker would")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("core.engines").setLevel(logging.INFO)  # which engine serves, and why
    import torch

    from trainer.config import BOOTSTRAP_RECIPE, TrainConfig
    from trainer.dataset import load_file

    for name in ("issues_train.csv", "issues_test.csv"):
        if not (args.data / name).is_file():
            parser.error(f"{args.data / name} is missing: --data names the folder of NLBSE'24's two files")
    test = load_file(args.data / "issues_test.csv")
    if args.served:
        return served(args, test)
    train = load_file(args.data / "issues_train.csv")
    recipe = {key: value for key, value in BOOTSTRAP_RECIPE.items() if key != "tfidf_share"}
    devices = [device for device in args.devices.split(",") if device != "cuda" or torch.cuda.is_available()]
    results = {"command": "python -m bench.cuda " + " ".join(_shown(sys.argv[1:])),
               "cpu": cpu_line(), "cpu_threads": torch.get_num_threads(), "torch": torch.__version__,
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
               "python": platform.python_version(), "recipe": recipe, "train_issues": len(train),
               "test_issues": len(test), "runs": []}
    for device in devices:
        config = TrainConfig(**recipe, device=device, base_model=args.base_model, max_steps=args.max_steps)
        run = measure(config, train, test, args.single)
        results["runs"].append(run)
        print(json.dumps(run), flush=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def measure(config, train, test, single: int) -> dict:
    """Train on `config.device`, then score `test` in batches and `single` issues one at a time."""
    import torch

    from trainer.evaluate import evaluate_classifier
    from trainer.train import fine_tune

    device = config.resolved_device()
    trained = fine_tune(config, train, progress=sys.stderr.isatty())
    classifier = trained.classifier()
    classifier.predict([example.text for example in test[:32]])  # warm-up: kernels, allocator, caches
    evaluation = evaluate_classifier(classifier, test, labels=trained.labels)
    run = {"device": device, "autocast": "float16" if trained.config.fp16 and device.startswith("cuda") else None,
            "steps": trained.steps, "train_seconds": round(trained.seconds, 2),
            "train_issues_per_second": round(min(len(train), trained.steps * config.batch_size) / trained.seconds, 1),
            "final_loss": round(trained.losses[-1], 4), "macro_f1": round(evaluation["macro_f1"], 4),
            "accuracy": round(evaluation["accuracy"], 4),
            "scored_issues_per_second": round(evaluation["issues_per_second"], 1),
            **one_at_a_time(classifier, [example.text for example in test[:single]]),
            "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20) if device.startswith("cuda") else None}
    if device != "cpu":
        run["served_on_cpu"] = same_on_cpu(trained, classifier, test)
    return run


def served(args, test) -> int:
    """Score the registered model in `args.served` by each engine a worker here could load it with."""
    import torch

    from core.classifier import load_classifier
    from core.engines import AUTO, TORCH_FP32
    from trainer.evaluate import evaluate_classifier

    results = {"command": "python -m bench.cuda " + " ".join(_shown(sys.argv[1:])), "cpu": cpu_line(),
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "engines": []}
    for engine in (AUTO, TORCH_FP32):
        classifier = load_classifier(args.served, engine=engine)
        classifier.predict([example.text for example in test[:32]])  # warm-up
        evaluation = evaluate_classifier(classifier, test, labels=classifier.labels)
        row = {"asked": engine, "serves": _engine_of(classifier), "macro_f1": round(evaluation["macro_f1"], 4),
               "accuracy": round(evaluation["accuracy"], 4),
               "scored_issues_per_second": round(evaluation["issues_per_second"], 1),
               **one_at_a_time(classifier, [example.text for example in test[:args.single]])}
        results["engines"].append(row)
        print(json.dumps(row), flush=True)
    results["encoder_one_thread"] = engines_one_thread(args.served, test, args.single)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def engines_one_thread(directory: Path, test, single: int) -> list[dict]:
    """The blend's encoder alone by each engine, on each device, one CPU thread as a worker has by default
    (ISSUE_SORTER_WORKER_THREADS=1): one issue at a time, as a labelling job scores it. No gate is asked."""
    import torch

    from core.card import ModelCard
    from core.encoder import TransformerClassifier, load_engine
    from core.engines import ORT_FP32, ORT_INT8

    directory = directory / "encoder" if (directory / "encoder").is_dir() else directory
    card = ModelCard.read(directory)
    torch.set_num_threads(1)
    loaders = {f"{engine} on cpu": (lambda engine=engine: load_engine(directory, card, engine, threads=1))
               for engine in (ORT_INT8, ORT_FP32)}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for bf16 in (True, False):
            loaders[f"pytorch{'-bf16' if bf16 else ''} on {device}"] = (
                lambda device=device, bf16=bf16: TransformerClassifier.from_directory(directory, card, device, bf16=bf16))
    rows = []
    texts = [example.text for example in test[:single]]
    for name, load in loaders.items():
        try:
            classifier = load()
        except Exception as error:  # noqa: BLE001 - an artefact the registry did not keep, a missing library
            rows.append({"engine": name, "error": f"{type(error).__name__}: {error}"})
            print(json.dumps(rows[-1]), flush=True)
            continue
        for text in texts[:5]:
            classifier.predict([text])  # warm-up
        rows.append({"engine": name, **one_at_a_time(classifier, texts)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def one_at_a_time(classifier, texts: list[str]) -> dict:
    """Milliseconds to score each text alone, as a labelling job does (the scores come back to the CPU as
    lists, so a GPU's work is done when `predict` returns)."""
    latencies = ms_each(lambda text: classifier.predict([text]), texts)
    return {"one_issue_ms_median": round(statistics.median(latencies), 2),
            "one_issue_ms_p90": round(statistics.quantiles(latencies, n=10)[-1], 2) if len(latencies) > 1 else None}


def _engine_of(classifier) -> str:
    """The engine and device of a loaded model, or of a blend's encoder."""
    encoder = getattr(classifier, "encoder", classifier)
    device = getattr(encoder, "device", "cpu")
    return f"{getattr(encoder, 'engine', type(encoder).__name__)} on {device}"


def same_on_cpu(trained, classifier, test) -> dict:
    """Save the model trained on the GPU, load it on the CPU as a worker without one does, and compare the
    scores of every test issue: the labels a CPU worker would give against the GPU's."""
    import tempfile

    from core.card import ModelCard
    from core.encoder import TransformerClassifier
    from trainer.evaluate import predict_all

    texts = [example.text for example in test]
    with tempfile.TemporaryDirectory() as directory:
        trained.save(directory, version="bench-cuda")
        on_cpu = TransformerClassifier.from_directory(directory, ModelCard.read(directory), device="cpu")
        cpu_scores = predict_all(on_cpu, texts, 32)
    gpu_scores = predict_all(classifier, texts, 32)
    same = sum(max(a, key=a.get) == max(b, key=b.get) for a, b in zip(cpu_scores, gpu_scores, strict=True))
    difference = max(abs(a[label] - b[label]) for a, b in zip(cpu_scores, gpu_scores, strict=True) for label in a)
    return {"same_top_label": round(same / len(texts), 4), "max_score_difference": round(difference, 6)}


def _shown(argv: list[str]) -> list[str]:
    """The command line without the machine's paths (they name where the data lay, not what it was)."""
    paths = ("--data", "--base-model", "--json", "--served")
    return [Path(word).name if before in paths else word for before, word in zip(["", *argv], argv, strict=False)]


def table(results: dict) -> str:
    """The runs as a Markdown table."""
    rows = ["| device | training (s) | steps | macro-F1 | accuracy | scored issues/s (batches) | one issue (ms, "
            "median / p90) |", "|---|---|---|---|---|---|---|"]
    for run in results["runs"]:
        name = f"{results['gpu']} (float16 autocast)" if run["device"].startswith("cuda") else \
            f"CPU, {results['cpu_threads']} threads"
        rows.append(f"| {name} | {run['train_seconds']} | {run['steps']} | {run['macro_f1']} | {run['accuracy']} | "
                    f"{run['scored_issues_per_second']} | {run['one_issue_ms_median']} / {run['one_issue_ms_p90']} |")
    return "\n".join(rows + ["", results["cpu"], f"torch {results['torch']}, {os.cpu_count()} CPUs seen"])


if __name__ == "__main__":
    sys.exit(main())
