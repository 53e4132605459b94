"""`issue-sorter measure-precision`: this CPU's training precision measured again by a short run of bf16 and
fp32, and kept under MODEL_DIR as the verdict every training after it reads (trainer.precision)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from core.engines import has_bf16
from core.settings import Settings
from issue_sorter.command import add
from trainer.bootstrap import HUB, choose_source, load_source
from trainer.config import BOOTSTRAP_RECIPE, TrainConfig
from trainer.precision import MeasureOptions, Verdict, Verdicts, measure_verdict, this_cpu


def add_commands(subparsers) -> None:
    parser = add(subparsers, "measure-precision", measure_precision,
                 "measure whether bf16 trains as well as fp32 on this CPU (a short run of each) and keep the "
                 "verdict for every training after it", database=False)
    parser.add_argument("--data", help=f"the issues to train on: a file, or `{HUB}` (default: as bootstrap-model "
                                       "finds its own)")
    parser.add_argument("--steps", type=int, default=MeasureOptions.steps,
                        help=f"optimizer steps of each precision (default {MeasureOptions.steps})")
    parser.add_argument("--held-out", type=int, default=MeasureOptions.held_out,
                        help=f"issues set aside that both are scored on (default {MeasureOptions.held_out})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def measure_precision(args: argparse.Namespace, settings: Settings) -> int:
    """Measure, keep, and say what was found."""
    if args.steps < 1 or args.held_out < 1:
        raise ValueError("--steps and --held-out must be at least 1")
    kind = this_cpu()
    if not has_bf16(kind.flags):
        print(f"{kind.key}: no bf16 instructions (AMX or AVX-512 BF16): fp32 trains here, nothing to measure")
        return 0
    examples, _, described = load_source(choose_source(args.data, os.environ), say=print)
    print(f"measuring {kind.key}: {args.steps} steps of bf16 and of fp32 on issues from {described}")
    options = MeasureOptions(steps=args.steps, held_out=args.held_out, min_issues=0)
    verdict = measure_verdict(TrainConfig(**BOOTSTRAP_RECIPE), examples, kind, options=options,
                              progress=not args.no_progress)
    verdicts = Verdicts.under(settings.model_dir)
    verdicts.record(verdict)
    print(describe(verdict, verdicts.path))
    return 0


def describe(verdict: Verdict, path: Path | None) -> str:
    """The verdict in one line."""
    return (f"{verdict.precision} trains on this CPU from now on: bf16 macro-F1 {verdict.macro_f1_bf16:.4f} "
            f"against fp32's {verdict.macro_f1_fp32:.4f} on {verdict.issues} issues (noise {verdict.noise:.4f}), "
            f"bf16 {verdict.speedup:.2f}x fp32's speed; kept in {path}")
