"""Training speed per precision on this CPU: the bootstrap's recipe (MiniLM, 128 tokens, batch 16) in fp32 and
under bf16 autocast, on the same issues, interleaved (fp32, bf16, fp32, bf16, ...) so that a shared machine's
load falls on both alike; the best run of each is reported, with the CPU's flags.

    .venv/bin/python -m bench.training_precision [--issues 96] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys

from bench.serving import cpu_line
from tests.paths import NLBSE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=96, help="training issues per run (6 steps of 16)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from trainer.config import TrainConfig
    from trainer.dataset import load_file
    from trainer.train import fine_tune

    torch.set_num_threads(args.threads)
    examples = mixed(load_file(NLBSE / "issues_train.csv"), args.issues)
    config = TrainConfig(max_length=128, epochs=1, batch_size=16, lr=5e-5)
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for precision in ("fp32", "bf16"):
            trained = fine_tune(config, examples, progress=False, precision=precision)
            best[precision] = min(best.get(precision, float("inf")), trained.seconds)
            print(f"{precision}: {trained.seconds:.1f} s, final loss {trained.losses[-1]:.3f}", file=sys.stderr)
    for precision, seconds in best.items():
        print(f"{precision}: best {seconds:.1f} s for {len(examples)} issues ({len(examples) / seconds:.1f} issues/s)")
    print(f"bf16 / fp32 speed: {best['fp32'] / best['bf16']:.2f}x")
    print(cpu_line())
    return 0


def mixed(examples, count: int):
    """The first `count` issues taking each label in turn (the file is sorted by label)."""
    by_label: dict[str, list] = {}
    for example in examples:
        by_label.setdefault(example.label, []).append(example)
    rounds = zip(*by_label.values())
    return [example for round_ in rounds for example in round_][:count]


if __name__ == "__main__":
    sys.exit(main())
