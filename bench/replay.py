"""Replay benchmark: does the loop make the bot better on a repository it has never seen?

1. A global model is fine-tuned (offline MiniLM) on the NLBSE'24 training issues of the OTHER four
   repositories, so the replayed repository is unseen, as it is for a newly installed App.
2. `issue-sorter replay` feeds all 600 issues (train + test split) of the replayed repository in the
   order given, through the real pipeline, with a simulated maintainer and retraining every K issues.

    .venv/bin/python bench/replay.py [--repo opencv/opencv] [--order time] [--retrain-every 100]

Writes docs/replay/<repo>-<order>.{json,csv,png}. Minutes on a 2-core CPU: see docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.paths import NLBSE  # noqa: E402  (the shared data's location, one definition)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="opencv/opencv")
    parser.add_argument("--order", choices=("time", "shuffled"), default="time")
    parser.add_argument("--retrain-every", type=int, default=100)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "bench-replay")
    args = parser.parse_args()

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

    both = NLBSE / "issues_train.csv", NLBSE / "issues_test.csv"
    merged = args.workdir / f"{slug}-all.jsonl"  # the repository's 600 issues, in a scratch file
    with merged.open("w") as handle:
        for path in both:
            for e in load_file(path):
                if e.repo == args.repo:
                    handle.write(json.dumps({"title": e.title, "body": e.body, "label": e.label, "repo": e.repo,
                                             "created_at": e.created_at.isoformat()}) + "\n")
    out = REPO_ROOT / "docs" / "replay"
    started = time.perf_counter()
    code = cli(["replay", str(merged), "--repo", args.repo, "--order", args.order,
                "--retrain-every", str(args.retrain_every), "--window", str(args.window),
                "--max-length", str(args.max_length), "--epochs", str(args.epochs),
                "--base-model-dir", str(base_dir), "--out", str(args.workdir / "curve"), "--json"])
    replay_minutes = (time.perf_counter() - started) / 60
    curve_dir = args.workdir / "curve"
    out.mkdir(parents=True, exist_ok=True)
    name = f"{slug}-{args.order}"
    for suffix in ("csv", "png", "json"):
        (out / f"{name}.{suffix}").write_bytes((curve_dir / f"learning_curve.{suffix}").read_bytes())
    print(f"base model: {base_minutes:.1f} min; replay: {replay_minutes:.1f} min; curve in {out}/{name}.*")
    return code


if __name__ == "__main__":
    sys.exit(main())
