"""Scratch: train the one fold of bench.unseen's protocol that leaves --repo out (the table's command's
arguments: 3 folds, 150 per repository and kind, 128 tokens, 1 epoch, balanced, the recipe's lr) and save
its blend as `--save-fold-models` does, for a replay that starts from it."""

import argparse
import sys
from pathlib import Path

from bench.quality import REPOS
from bench.unseen import FoldModels, members
from tests.paths import SHARED


def main() -> int:
    import torch
    import transformers

    from core.kinds import KINDS
    from trainer.config import BOOTSTRAP_RECIPE, TrainConfig
    from trainer.dataset import load_file
    from trainer.sources import NLBSE_TEST_FILE, MixConfig, load_sources
    from trainer.unseen import fold_data, make_folds

    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default="opencv/opencv")
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(2)
    config = TrainConfig(device="cpu", seed=42, **BOOTSTRAP_RECIPE)
    mix = MixConfig(per_group_kind=150, seed=42)
    sources = load_sources(SHARED / "data")
    folds = make_folds(sources, 3, per_group_kind=100000, seed=42)
    index = next(i for i, group in enumerate(folds.groups) if args.repo in group)
    train, _ = fold_data(sources, folds, index, mix)
    print(f"fold {index}: {folds.groups[index]}; training on {len(train)}", flush=True)
    test = [e for e in load_file(SHARED / "data" / NLBSE_TEST_FILE) if e.repo in REPOS]
    args.workdir.mkdir(parents=True, exist_ok=True)
    keep = FoldModels(folds, args.workdir, config.tfidf_share, test)
    for name, trainer in members(config, KINDS, keep).items():
        trainer(train)
        print(f"{name} trained", flush=True)
    keep.write_index()
    return 0


if __name__ == "__main__":
    sys.exit(main())
