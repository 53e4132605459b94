"""bench/unseen.py's out-of-fold scores with the encoder frozen (a LR head per fold over its mean-pooled
embeddings), saving those embeddings too, so the replays over them (bench/memory_rule.py,
bench/precision_target.py) have a memory to replay in minutes where the fine-tuned run takes hours on CPU.
The frozen encoder is not the served recipe: its figures say what the rules do, not what the service scores.

    nice .venv/bin/python -m bench.frozen_oof --workdir var/bench-frozen [--folds 3] [--max-length 128]

Writes <workdir>/unseen-oof.json and <workdir>/unseen-embeddings.npy, as bench/unseen.py does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.unseen import members, save_out_of_fold
from tests.paths import SHARED


def main() -> int:
    import numpy as np
    import torch
    import transformers

    from core.kinds import KINDS
    from trainer.config import BOOTSTRAP_RECIPE, TrainConfig
    from trainer.sources import MixConfig, describe, load_sources
    from trainer.unseen import make_folds, run_folds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--per-group-kind", type=int, default=150, help="the training mix's cap")
    parser.add_argument("--eval-per-group-kind", type=int, default=100000, help="issues scored per group, kind")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(2)
    config = TrainConfig(device="cpu", seed=args.seed, **(BOOTSTRAP_RECIPE | {"max_length": args.max_length}))
    sources = load_sources(SHARED / "data")
    folds = make_folds(sources, args.folds, per_group_kind=args.eval_per_group_kind, seed=args.seed)
    print(f"{len(folds.groups)} folds; scoring {describe(folds.pool)}", flush=True)
    models = members(config, KINDS, "frozen")
    oof = run_folds(sources, folds, models, MixConfig(per_group_kind=args.per_group_kind, seed=args.seed),
                    log=lambda line: print(line, flush=True))
    save_out_of_fold(oof, args.workdir)
    encoder = models["encoder"].__self__  # FrozenEncoder: every pool text is in its cache by now
    vectors = encoder.vectors([example.text for example in folds.pool])
    np.save(args.workdir / "unseen-embeddings.npy", np.asarray(vectors, dtype=np.float32))
    print(f"wrote {args.workdir / 'unseen-oof.json'} and unseen-embeddings.npy "
          f"({encoder.embed_seconds / 60:.1f} min embedding)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
