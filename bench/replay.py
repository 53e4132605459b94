"""Replay benchmark: does the loop make the bot better on a repository it has never seen?

1. A global model is fine-tuned (offline MiniLM) on the NLBSE'24 training issues of every repository but the
   replayed one, so the replayed repository is unseen, as it is for a newly installed App.
2. `issue-sorter replay` feeds the replayed repository's issues in the order given, through the real
   pipeline, with a simulated maintainer, once per mode, from the same starting model:
   `off` (--no-learning: the starting model frozen, no memory, no retraining), `memory` (--no-retrain: the
   memory alone) and `full` (memory and retraining every K issues).

    .venv/bin/python bench/replay.py [--repo opencv/opencv] [--order shuffled] [--modes off,memory,full]
    .venv/bin/python bench/replay.py --repo huggingface/datasets --order time \
        --file ../shared/data/huggingface-datasets-issues/datasets-issues.zip

Writes docs/replay/<repo>-<order>-<mode>.{json,csv,png} and <repo>-<order>-modes.{json,png} (every mode,
window by window, and each mode's gain over `off`). Minutes on a 2-core CPU: see docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.charts import finish  # noqa: E402
from tests.paths import NLBSE  # noqa: E402  (the shared data's location, one definition)

MODES = {"off": ["--no-learning"], "memory": ["--no-retrain"], "full": []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="opencv/opencv")
    parser.add_argument("--file", type=Path, action="append",
                        help="labelled file(s) holding the repository's issues (default: NLBSE'24 train + test)")
    parser.add_argument("--order", choices=("time", "shuffled"), default="shuffled")
    parser.add_argument("--limit", type=int, default=600, help="the repository's first N issues in that order")
    parser.add_argument("--retrain-every", type=int, default=150)
    parser.add_argument("--window", type=int, default=150)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--modes", default="off,memory,full", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-replay")
    args = parser.parse_args()
    modes = args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")

    from issue_sorter.cli import main as cli
    from trainer.config import TrainConfig
    from trainer.dataset import load_file
    from trainer.train import fine_tune

    slug = args.repo.replace("/", "-")
    base_dir = args.workdir / f"base-without-{slug}-{args.max_length}"
    started = time.perf_counter()
    if not (base_dir / "issue_sorter.json").exists():
        others = [e for e in load_file(NLBSE / "issues_train.csv") if e.repo != args.repo]
        trained = fine_tune(TrainConfig(max_length=args.max_length, epochs=2), others)
        trained.save(base_dir, version=f"base-without-{slug}", metrics={}, thresholds={}, data_fingerprint="")
    base_minutes = (time.perf_counter() - started) / 60

    files = args.file or [NLBSE / "issues_train.csv", NLBSE / "issues_test.csv"]
    merged = args.workdir / f"{slug}-all.jsonl"  # the repository's issues, in a scratch file
    args.workdir.mkdir(parents=True, exist_ok=True)
    with merged.open("w") as handle:
        for path in files:
            for e in load_file(path):
                if e.repo == args.repo:
                    handle.write(json.dumps({"title": e.title, "body": e.body, "label": e.label, "repo": e.repo,
                                             "created_at": e.created_at.isoformat() if e.created_at else None})
                                 + "\n")
    out = REPO_ROOT / "docs" / "replay"
    out.mkdir(parents=True, exist_ok=True)
    results, minutes = {}, {}
    for mode in modes:
        started = time.perf_counter()
        curve_dir = args.workdir / f"curve-{mode}"
        code = cli(["replay", str(merged), "--repo", args.repo, "--order", args.order, "--limit", str(args.limit),
                    "--retrain-every", str(args.retrain_every), "--window", str(args.window),
                    "--max-length", str(args.max_length), "--epochs", str(args.epochs),
                    "--base-model-dir", str(base_dir), "--out", str(curve_dir), "--json", *MODES[mode]])
        if code:
            return code
        minutes[mode] = round((time.perf_counter() - started) / 60, 1)
        name = f"{slug}-{args.order}-{mode}"
        for suffix in ("csv", "png", "json"):
            (out / f"{name}.{suffix}").write_bytes((curve_dir / f"learning_curve.{suffix}").read_bytes())
        results[mode] = json.loads((curve_dir / "learning_curve.json").read_text())
    table = side_by_side(results)
    summary = {"repo": args.repo, "order": args.order, "issues": args.limit, "window": args.window,
               "retrain_every": args.retrain_every, "base_model_minutes": round(base_minutes, 1),
               "replay_minutes": minutes, **table}
    (out / f"{slug}-{args.order}-modes.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_modes(summary, out / f"{slug}-{args.order}-modes.png")
    print(json.dumps(summary, indent=2))
    return 0


def side_by_side(results: dict[str, dict]) -> dict:
    """Every mode's accuracy window by window, and against `off`: the mean over the windows after the
    first (what learning can change) and the worst window's difference (what it must not break)."""
    windows = {mode: [point["accuracy"] for point in result["curve"]] for mode, result in results.items()}
    report: dict = {"windows": windows}
    if "off" in windows:
        off = windows["off"]
        for mode, accuracies in windows.items():
            if mode == "off" or len(accuracies) < 2:
                continue
            later = [a - b for a, b in zip(accuracies[1:], off[1:], strict=True)]
            report[f"{mode}_vs_off"] = {
                "mean_gain_after_first_window_points": round(100 * sum(later) / len(later), 1),
                "worst_window_points": round(100 * min(a - b for a, b in zip(accuracies, off, strict=True)), 1)}
    report["retrains"] = {mode: result["retrains"] for mode, result in results.items() if result["retrains"]}
    return report


def plot_modes(summary: dict, path: Path) -> Path:
    """The modes' curves on one chart: what the memory and the retraining each add to the frozen model."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), dpi=120)
    axes = figure.add_subplot()
    colours = {"off": "#6e7781", "memory": "#0969da", "full": "#1a7f37"}
    names = {"off": "learning off", "memory": "memory alone", "full": "memory + retraining"}
    for mode, accuracies in summary["windows"].items():
        seen = [summary["window"] * i for i in range(len(accuracies))]
        axes.plot(seen, accuracies, marker="o", color=colours.get(mode), label=names.get(mode, mode))
    for retrain in summary.get("retrains", {}).get("full", []):
        axes.axvline(retrain["seen"], color="#1a7f37", linestyle=":", linewidth=1)
    return finish(figure, axes, path,
                  title=f"Replay of {summary['repo']}, {summary['order']} order ({summary['issues']} issues)",
                  xlabel="issues seen (dotted: a retraining)", ylabel=f"accuracy on the next {summary['window']} issues")


if __name__ == "__main__":
    sys.exit(main())
