"""Scratch: OpenVINO bf16 with a few static shapes beside the dynamic graph, one process per variant."""
from __future__ import annotations

import argparse, json, statistics, subprocess, sys, time
from pathlib import Path

import numpy as np

from bench.serving import issue_texts, ms_each, peak_rss_mb
from tests.paths import NLBSE

VARIANTS = ("dynamic", "s1x128", "s1buckets", "bounded", "s1x128+s32x128")


def build(model_dir: Path, variant: str):
    import openvino
    from transformers import PreTrainedTokenizerFast
    from core.card import ModelCard
    from core.encoder import OpenVinoClassifier

    card = ModelCard.read(model_dir)
    path = model_dir / "fast" / "model.fp32.onnx"
    core = openvino.Core()
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "bf16", "INFERENCE_NUM_THREADS": 2}

    def compiled(shape=None):
        model = core.read_model(str(path))
        if shape is not None:
            model.reshape({graph_input.any_name: shape for graph_input in model.inputs})
        return core.compile_model(model, "CPU", config)

    dynamic = compiled(openvino.PartialShape([openvino.Dimension(1, 32), openvino.Dimension(1, 128)])
                       if variant == "bounded" else None)
    statics = {}
    if variant in ("s1x128", "s1x128+s32x128"):
        statics[(1, 128)] = compiled([1, 128])
    if variant == "s1buckets":
        for length in (32, 64, 128):
            statics[(1, length)] = compiled([1, length])
    if variant == "s1x128+s32x128":
        statics[(32, 128)] = compiled([32, 128])
    requests = {key: c.create_infer_request() for key, c in statics.items()}

    class Variant(OpenVinoClassifier):
        def _run_graph(self, feed):
            rows, length = feed["input_ids"].shape
            bucket = next(((r, l) for (r, l) in sorted(requests) if r == rows and l >= length), None)
            if bucket is None:
                return super()._run_graph(feed)
            padded = {name: np.pad(value, ((0, 0), (0, bucket[1] - length))) for name, value in feed.items()}
            out = requests[bucket].infer(padded)
            return out["logits"].copy(), out["last_hidden_state"][:, :length].copy()

    return Variant(dynamic, PreTrainedTokenizerFast.from_pretrained(model_dir), card, path, "openvino-bf16")


def worker(args):
    texts = issue_texts(args.issues)
    t0 = time.perf_counter()
    classifier = build(args.model, args.variant)
    load = time.perf_counter() - t0
    top = lambda rows: [max(r, key=r.get) for r in rows]
    classifier.predict([texts[0]])
    t0 = time.perf_counter()
    labels = top(classifier.predict(texts, batch_size=32))
    backfill = len(texts) / (time.perf_counter() - t0)
    lat = ms_each(lambda t: classifier.predict([t]), texts[:args.single])
    single = len(lat) * 1000 / sum(lat)
    print(json.dumps({"variant": args.variant, "load_s": load, "backfill": backfill, "single": single,
                      "p50": statistics.median(lat), "rss": peak_rss_mb(), "top": labels}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--issues", type=Path, default=NLBSE / "issues_test.csv")
    p.add_argument("--single", type=int, default=300)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--variant")
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args()
    if args.variant:
        return worker(args)
    results = {}
    for r in range(args.rounds):
        for v in ["pipeline-128"] + args.variants.split(","):
            if v == "pipeline-128":
                cmd = [sys.executable, "-m", "bench.serving", "--worker", "pipeline-128", "--model", str(args.model),
                       "--single", str(args.single), "--batch-size", "32", "--threads", "2"]
                out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
                row = {"backfill": out["backfill_per_s"], "single": out["single_per_s"], "p50": out["p50_ms"],
                       "rss": out["peak_rss_mb"], "load_s": out["load_s"], "top": out["top"]}
            else:
                cmd = [sys.executable, "-m", "bench.amx_static", "--model", str(args.model), "--variant", v,
                       "--single", str(args.single)]
                row = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
            results.setdefault(v, []).append(row)
            print(v, r, {k: round(x, 2) for k, x in row.items() if isinstance(x, float)}, flush=True)
    ref = results["dynamic"][0]["top"]
    truth = issue_texts(args.issues, "label")
    from trainer.evaluate import macro_f1
    base = statistics.median(x["backfill"] for x in results["pipeline-128"])
    base1 = statistics.median(x["single"] for x in results["pipeline-128"])
    for v, rows in results.items():
        b = statistics.median(x["backfill"] for x in rows); s = statistics.median(x["single"] for x in rows)
        agree = sum(a == c for a, c in zip(rows[0]["top"], ref)) / len(ref)
        print(f"{v}: backfill {b:.1f} ({b/base:.2f}x) single {s:.1f} ({s/base1:.2f}x) p50 {statistics.median(x['p50'] for x in rows):.2f} "
              f"rss {max(x['rss'] for x in rows):.0f} MB load {statistics.median(x['load_s'] for x in rows):.2f}s "
              f"agree-dyn {agree:.2%} mf1 {macro_f1(truth, rows[0]['top'], sorted(set(truth))):.4f}")


if __name__ == "__main__":
    main()
