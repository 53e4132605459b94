"""What another encoder costs on this machine: ModernBERT-base and DeBERTa-v3-base (the seed lesson's) beside the
served all-MiniLM-L6-v2, to train the bootstrap and to serve.

    .venv/bin/python -m bench.encoder_cost [--architectures modernbert deberta-v3 minilm] [--steps 16] [--json OUT]

No hub: each base-size encoder is built here, randomly initialised, from its published config (layers, width,
attention, vocabulary), with the seed-encoder tests' local tokenizer of its kind; speed and memory do not
depend on the weights' values, and the tokenizers' few thousand words give somewhat different token counts
from the real ones. Each is taken through the App's own training loop with the bootstrap's recipe (batch 16,
128 tokens) in the precision this CPU's verdict says (trainer.precision) for --steps steps: the bootstrap's
training time is the median step × the bootstrap's 386 steps. Then the fast path's ONNX export, and one issue
at a time (--single issues) and batches of 32 by PyTorch fp32, ONNX Runtime fp32 and OpenVINO bf16 (where the
CPU has bf16 instructions), --threads threads. The training runs in a process of its own, and so does each
engine (as a worker loads one), so that peak memory is each one's own and no engine runs beside another's idle
threads. Results: docs/BENCHMARKS.md, docs/ENCODERS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.serving import cpu_line
from core.engines import has_bf16, this_machine
from tests.paths import REPO_ROOT

ARCHITECTURES = ("modernbert", "deberta-v3", "minilm")
ENGINES = ("openvino-bf16", "onnxruntime-fp32", "pytorch")  # OpenVINO's bf16 only where bf16 is native
BOOTSTRAP_STEPS = 386  # the bootstrap's steps: 6,163 issues of the shared mix in batches of 16, one epoch
# answerdotai/ModernBERT-base's and microsoft/deberta-v3-base's config.json, as far as cost goes
MODERNBERT_BASE = {"vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
                   "num_attention_heads": 12, "max_position_embeddings": 8192, "global_attn_every_n_layers": 3,
                   "local_attention": 128, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
                   "classifier_pooling": "mean"}
DEBERTA_V3_BASE = {"vocab_size": 128100, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                   "num_attention_heads": 12, "max_position_embeddings": 512, "relative_attention": True,
                   "position_buckets": 256, "pos_att_type": ["p2c", "c2p"], "position_biased_input": False,
                   "norm_rel_ebd": "layer_norm", "share_att_key": True, "type_vocab_size": 0,
                   "max_relative_positions": -1}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architectures", nargs="+", choices=ARCHITECTURES, default=list(ARCHITECTURES))
    parser.add_argument("--steps", type=int, default=16, help="training steps timed (the first two left out)")
    parser.add_argument("--single", type=int, default=100, help="issues timed one at a time, per engine")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--train", choices=ARCHITECTURES, help=argparse.SUPPRESS)  # one, in this process
    parser.add_argument("--serve", choices=ENGINES, help=argparse.SUPPRESS)  # one engine, in this process
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 3:
        parser.error("--steps must be at least 3: the first two steps pay for warming up")
    if args.train:
        print(json.dumps(train(args.train, args)))
        return 0
    if args.serve:
        print(json.dumps(serve(args.serve, args)))
        return 0
    results = {"cpu": cpu_line(), "steps": args.steps, "threads": args.threads, "runs": []}
    with tempfile.TemporaryDirectory() as scratch:
        for architecture in args.architectures:
            workdir = Path(scratch) / architecture
            run = in_a_process(["--train", architecture], workdir, args)
            for engine in ENGINES if has_bf16(this_machine().cpu_flags) else ENGINES[1:]:
                run[engine] = in_a_process(["--serve", engine], workdir, args)
            results["runs"].append(run)
            print(json.dumps(run), file=sys.stderr)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def in_a_process(what: list[str], workdir: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "bench.encoder_cost", *what, "--workdir", str(workdir), "--steps",
               str(args.steps), "--single", str(args.single), "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO_ROOT,
                          env=os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    if done.returncode:
        raise SystemExit(f"{' '.join(what)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def base_model(architecture: str, directory: Path) -> Path:
    """A randomly initialised encoder of `architecture`'s published size and its tokenizer, saved in `directory`
    (MiniLM: the offline package's own)."""
    import torch
    from transformers import AutoModel, DebertaV2Config, ModernBertConfig

    from tests.trainer.test_seed_encoders import build_tokenizer
    from trainer.config import offline_minilm_path

    minilm = Path(offline_minilm_path())
    if architecture == "minilm":
        return minilm
    if architecture == "modernbert":
        tokenizer = build_tokenizer("modernbert", minilm)
        config = ModernBertConfig(**MODERNBERT_BASE, pad_token_id=tokenizer.pad_token_id,
                                  cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                                  bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    else:
        tokenizer = build_tokenizer("deberta-v2", minilm)
        config = DebertaV2Config(**DEBERTA_V3_BASE, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def train(architecture: str, args: argparse.Namespace) -> dict:
    """Train `architecture` for --steps steps and export it, under --workdir; in this process."""
    import torch

    from trainer.config import BOOTSTRAP_RECIPE, TrainConfig
    from trainer.fast_path import export_onnx
    from trainer.precision import Verdicts, this_cpu
    from trainer.train import fine_tune

    torch.set_num_threads(args.threads)
    source = base_model(architecture, args.workdir / "base")
    verdict = Verdicts(None).find(this_cpu())  # the shipped verdict of this CPU kind, if any
    precision = verdict.precision if verdict else "fp32"
    config = TrainConfig(**BOOTSTRAP_RECIPE | {"tfidf_share": 0.0, "base_model": str(source),
                                               "max_steps": args.steps, "device": "cpu"})
    trained = fine_tune(config, issues(), progress=False, precision=precision)
    step = statistics.median(trained.step_seconds[2:])
    run = {"architecture": architecture, "parameters_m": round(sum(p.numel() for p in trained.model.parameters())
                                                                 / 1e6, 1),
           "precision": precision, "median_step_s": round(step, 3),
           "bootstrap_training_min": round(BOOTSTRAP_STEPS * step / 60, 1),
           "training_peak_rss_mb": peak_rss_mb()}
    directory = trained.save(args.workdir / "trained", version=architecture)
    started = time.perf_counter()
    export_onnx(directory, calibration=(), max_length=config.max_length)
    run["export_s"] = round(time.perf_counter() - started, 1)
    return run


def serve(engine: str, args: argparse.Namespace) -> dict:
    """One issue at a time and batches of 32 by `engine` on the model `train` left in --workdir."""
    from core.card import ModelCard
    from core.encoder import OnnxClassifier, OpenVinoClassifier, TransformerClassifier
    from core.engines import FAST_DIR, FP32_FILE

    directory = args.workdir / "trained"
    card, graph = ModelCard.read(directory), directory / FAST_DIR / FP32_FILE
    if engine == "pytorch":
        import torch

        torch.set_num_threads(args.threads)
        classifier = TransformerClassifier.from_directory(directory, card, device="cpu")
    else:
        runner = OpenVinoClassifier if engine == "openvino-bf16" else OnnxClassifier
        classifier = runner.from_file(directory, graph, card, threads=args.threads, engine=engine)
    texts = [example.text for example in issues()[:max(256, args.single)]]
    classifier.predict(texts[:2])  # the first calls pay for lazy set-up
    each = []
    for text in texts[:args.single]:
        started = time.perf_counter()
        classifier.predict([text])
        each.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    classifier.predict(texts[:256], batch_size=32)
    return {"single_per_s": round(len(each) * 1000 / sum(each), 1), "single_p50_ms": round(statistics.median(each), 1),
            "batch32_per_s": round(256 / (time.perf_counter() - started), 1), "peak_rss_mb": peak_rss_mb()}


def issues():
    """The bootstrap's training issues (the shared mix), in its order."""
    from trainer.sources import load_sources, shared_dir, training_mix

    return training_mix(load_sources(shared_dir() / "data"))


def peak_rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def table(results: dict) -> str:
    engines = ENGINES
    lines = ["| encoder | parameters | step (s) | bootstrap's training (min) | training peak RSS (MB) | "
             + " | ".join(f"{engine}: one at a time (issues/s; p50 ms) · batch 32" for engine in engines) + " |",
             "|---" * (5 + len(engines)) + "|"]
    for run in results["runs"]:
        cells = [f"{run[e]['single_per_s']}; {run[e]['single_p50_ms']} · {run[e]['batch32_per_s']}" if e in run else ""
                 for e in engines]
        lines.append(f"| {run['architecture']} | {run['parameters_m']} M | {run['median_step_s']} ({run['precision']}) "
                     f"| {run['bootstrap_training_min']} | {run['training_peak_rss_mb']} | " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", f"{results['steps']} steps timed, {results['threads']} threads; {results['cpu']}"])


if __name__ == "__main__":
    raise SystemExit(main())
