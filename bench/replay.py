"""Replay benchmark: does the loop make the bot better on a repository it has never seen?

    .venv/bin/python -m bench.replay [--repo opencv/opencv] [--order shuffled] [--history 0,25,100]

`issue-sorter replay` per mode (`off`: learning off, `memory`: the memory alone, `full`: memory and
retraining) from one starting model that never saw the repository (`--base-model DIR`, else trained here),
with `--history` once per labelled history at install. Writes docs/replay/<repo>-<order>-*; results:
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from simulation.replay import chart, save_chart
from tests.paths import NLBSE, REPO_ROOT

MODES = {"off": ["--no-learning"], "memory": ["--no-retrain"], "full": []}
NAMES = {"off": "learning off", "memory": "memory alone", "full": "memory + retraining"}
COLOURS = {"off": "#6e7781", "memory": "#0969da", "full": "#1a7f37"}


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    base_dir = args.base_model or train_base(args.repo, args.max_length, args.workdir)
    base_minutes = round((time.perf_counter() - started) / 60, 1)
    merged, available = write_repository_file(args.repo, args.file, args.workdir)
    histories = [n for n in args.history if n + args.window <= available]  # a window of new issues at least
    if not histories:
        raise SystemExit(f"the file has {available} issues of {args.repo}: no history of {args.history} leaves a "
                         f"window of {args.window} new issues")
    out = REPO_ROOT / "docs" / "replay"
    out.mkdir(parents=True, exist_ok=True)
    slug = f"{args.repo.replace('/', '-')}-{args.order}"
    runs = {n: run_modes(args, merged, base_dir, n) for n in histories}
    if args.history == [0]:
        summary = write_modes(args, runs[0], out, slug, base_minutes)
    else:
        summary = write_history(args, runs, out, slug, base_dir, base_minutes, available)
    print(json.dumps(summary, indent=2))
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="opencv/opencv")
    parser.add_argument("--file", type=Path, action="append",
                        help="labelled file(s) holding the repository's issues (default: NLBSE'24 train + test)")
    parser.add_argument("--order", choices=("time", "shuffled"), default="shuffled")
    parser.add_argument("--limit", type=int, default=600, help="new issues replayed (after the history)")
    parser.add_argument("--history", default="0", help="comma-separated Ns: labelled issues before install")
    parser.add_argument("--retrain-every", type=int, default=150)
    parser.add_argument("--window", type=int, default=150)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--modes", default="off,memory,full", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--base-model", type=Path, metavar="DIR",
                        help="the starting model (a registered-format directory; default: trained here)")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-replay")
    args = parser.parse_args()
    args.modes = args.modes.split(",")
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")
    try:
        args.history = sorted({int(n) for n in args.history.split(",")})
    except ValueError:
        parser.error(f"--history takes comma-separated whole numbers, not {args.history!r}")
    if args.history[0] < 0:
        parser.error("--history: a history is 0 issues or more")
    if args.base_model and not (args.base_model / "issue_sorter.json").exists():
        parser.error(f"--base-model {args.base_model}: no issue_sorter.json there (not a saved model directory)")
    return args


def train_base(repo: str, max_length: int, workdir: Path) -> Path:
    """MiniLM fine-tuned on NLBSE'24's training issues of every other repository (kept for the next run)."""
    from trainer.config import TrainConfig
    from trainer.dataset import load_file
    from trainer.train import fine_tune

    slug = repo.replace("/", "-")
    base_dir = workdir / f"base-without-{slug}-{max_length}"
    if not (base_dir / "issue_sorter.json").exists():
        others = [e for e in load_file(NLBSE / "issues_train.csv") if e.repo != repo]
        trained = fine_tune(TrainConfig(max_length=max_length, epochs=2), others)
        trained.save(base_dir, version=f"base-without-{slug}", metrics={}, thresholds={}, data_fingerprint="")
    return base_dir


def write_repository_file(repo: str, files: list[Path] | None, workdir: Path) -> tuple[Path, int]:
    """The repository's issues of `files`, in a scratch JSON Lines file; and how many there are."""
    from trainer.dataset import load_file

    merged = workdir / f"{repo.replace('/', '-')}-all.jsonl"
    workdir.mkdir(parents=True, exist_ok=True)
    count = 0
    with merged.open("w") as handle:
        for path in files or [NLBSE / "issues_train.csv", NLBSE / "issues_test.csv"]:
            for e in load_file(path):
                if e.repo == repo:
                    count += 1
                    handle.write(json.dumps({"title": e.title, "body": e.body, "label": e.label, "repo": e.repo,
                                             "created_at": e.created_at.isoformat() if e.created_at else None})
                                 + "\n")
    return merged, count


def run_modes(args: argparse.Namespace, merged: Path, base_dir: Path, history: int) -> dict[str, dict]:
    """One replay per mode from the same starting model, after `history` labelled issues; each result
    carries the minutes it took."""
    from issue_sorter.cli import main as cli

    results = {}
    for mode in args.modes:
        started = time.perf_counter()
        curve_dir = args.workdir / f"curve-h{history}-{mode}"
        code = cli(["replay", str(merged), "--repo", args.repo, "--order", args.order, "--limit", str(args.limit),
                    "--history", str(history), "--retrain-every", str(args.retrain_every),
                    "--window", str(args.window), "--max-length", str(args.max_length), "--epochs", str(args.epochs),
                    "--base-model-dir", str(base_dir), "--out", str(curve_dir), "--json", *MODES[mode]])
        if code:
            raise SystemExit(code)
        results[mode] = {**json.loads((curve_dir / "learning_curve.json").read_text()),
                         "minutes": round((time.perf_counter() - started) / 60, 1), "curve_dir": str(curve_dir)}
    return results


def write_modes(args: argparse.Namespace, results: dict[str, dict], out: Path, slug: str,
                base_minutes: float) -> dict:
    """Each mode's curve, and the modes side by side (no history)."""
    for mode, result in results.items():
        for suffix in ("csv", "png", "json"):
            (out / f"{slug}-{mode}.{suffix}").write_bytes((Path(result["curve_dir"]) / f"learning_curve.{suffix}")
                                                          .read_bytes())
    summary = {"repo": args.repo, "order": args.order, "issues": args.limit, "window": args.window,
               "retrain_every": args.retrain_every, "base_model_minutes": base_minutes,
               "replay_minutes": {mode: result["minutes"] for mode, result in results.items()},
               **side_by_side(results)}
    (out / f"{slug}-modes.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_modes(summary, out / f"{slug}-modes.png")
    return summary


def side_by_side(results: dict[str, dict]) -> dict:
    """Every mode's accuracy window by window, and against `off`: the mean over the windows after the
    first (what learning can change) and the worst window's difference (what it must not break)."""
    windows = {mode: [point["accuracy"] for point in result["curve"]] for mode, result in results.items()}
    report: dict = {"windows": windows,
                    "macro_f1_windows": {mode: [point["macro_f1"] for point in result["curve"]]
                                         for mode, result in results.items()}}
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


def write_history(args: argparse.Namespace, runs: dict[int, dict[str, dict]], out: Path, slug: str,
                  base_dir: Path, base_minutes: float, available: int) -> dict:
    """One row per history N and mode (overall accuracy and macro-F1 on the new issues, each window's),
    as JSON, a Markdown table and one chart."""
    rows = [{"history": n, "mode": mode, "new_issues": result["issues"],
             "memory_at_install": result.get("memory_at_install", 0),
             "accuracy": round(result["accuracy_overall"], 3), "macro_f1": round(result["macro_f1_overall"], 3),
             "windows": [(round(p["accuracy"], 3), round(p["macro_f1"], 3)) for p in result["curve"]],
             "minutes": result["minutes"]}
            for n, results in runs.items() for mode, result in results.items()]
    summary = {"repo": args.repo, "order": args.order, "issues_in_file": available, "limit": args.limit,
               "window": args.window, "modes": args.modes, "base_model": base_dir.name,
               "base_model_minutes": base_minutes, "skipped_histories": sorted(set(args.history) - set(runs)),
               "rows": rows}
    (out / f"{slug}-history.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / f"{slug}-history.md").write_text(history_table(summary) + "\n")
    plot_history(summary, out / f"{slug}-history.png")
    return summary


def history_table(summary: dict) -> str:
    """The Markdown table of docs/BENCHMARKS.md: per N, each mode's accuracy and macro-F1, and the gain."""
    modes = summary["modes"]
    by_key = {(row["history"], row["mode"]): row for row in summary["rows"]}
    head = ["history N", "new issues", "memory at install"]
    head += [f"{NAMES[m]} {metric}" for m in modes for metric in ("accuracy", "macro-F1")]
    head += [f"{NAMES[m]} vs off (points)" for m in modes if m != "off" and "off" in modes]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in sorted({row["history"] for row in summary["rows"]}):
        first = by_key[(n, modes[0])]
        cells = [str(n), str(first["new_issues"]), str(max(by_key[(n, m)]["memory_at_install"] for m in modes))]
        cells += [f"{by_key[(n, m)][metric]:.3f}" for m in modes for metric in ("accuracy", "macro_f1")]
        cells += [f"{100 * (by_key[(n, m)]['accuracy'] - by_key[(n, 'off')]['accuracy']):+.1f} / "
                  f"{100 * (by_key[(n, m)]['macro_f1'] - by_key[(n, 'off')]['macro_f1']):+.1f}"
                  for m in modes if m != "off" and "off" in modes]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_history(summary: dict, path: Path) -> Path:
    """Accuracy (solid) and macro-F1 (dashed) on the new issues against the history's size, per mode."""
    axes = chart()
    histories = sorted({row["history"] for row in summary["rows"]})
    for mode in summary["modes"]:
        rows = {row["history"]: row for row in summary["rows"] if row["mode"] == mode}
        positions = range(len(histories))
        axes.plot(positions, [rows[n]["accuracy"] for n in histories], marker="o", color=COLOURS[mode],
                  label=f"{NAMES[mode]}: accuracy")
        axes.plot(positions, [rows[n]["macro_f1"] for n in histories], marker="s", linestyle="--",
                  color=COLOURS[mode], label=f"{NAMES[mode]}: macro-F1")
    axes.set_xticks(range(len(histories)), [str(n) for n in histories])
    return save_chart(axes, path, title=f"{summary['repo']}, {summary['order']} order: an install with history",
                      xlabel="labelled issues on the repository when the App is installed",
                      ylabel=f"on the next {summary['limit']} new issues (at most)")


def plot_modes(summary: dict, path: Path) -> Path:
    """The modes' curves on one chart: what the memory and the retraining each add to the frozen model."""
    axes = chart()
    for mode, accuracies in summary["windows"].items():
        seen = [summary["window"] * i for i in range(len(accuracies))]
        axes.plot(seen, accuracies, marker="o", color=COLOURS.get(mode), label=NAMES.get(mode, mode))
    for retrain in summary.get("retrains", {}).get("full", []):
        axes.axvline(retrain["seen"], color="#1a7f37", linestyle=":", linewidth=1)
    return save_chart(axes, path,
                      title=f"Replay of {summary['repo']}, {summary['order']} order ({summary['issues']} issues)",
                      xlabel="issues seen (dotted: a retraining)",
                      ylabel=f"accuracy on the next {summary['window']} issues")


if __name__ == "__main__":
    sys.exit(main())
