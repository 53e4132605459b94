"""The tiny model: all-MiniLM-L6-v2 fine-tuned for one short epoch on 48 real NLBSE issues, 16 each of bug,
feature and question. The tests' `tiny_model_dir` and the benchmarks that need a served model but do not
measure its accuracy (bench.latency, bench.scale, bench.chaos) train it here, and promote it (or another)
with `promote_model`."""

from __future__ import annotations

from pathlib import Path

from tests.paths import NLBSE

PER_KIND = 16
KINDS = ("bug", "feature", "question")


def train_tiny_model(directory: Path, *, max_length: int = 64, version: str = "tiny") -> Path:
    """Fine-tune it and save it (real weights, tokenizer and model card, no thresholds) in `directory`."""
    from trainer.config import TrainConfig
    from trainer.dataset import load_file
    from trainer.train import fine_tune

    examples = load_file(NLBSE / "issues_train.csv")
    picked = [example for kind in KINDS for example in [e for e in examples if e.label == kind][:PER_KIND]]
    trained = fine_tune(TrainConfig(max_length=max_length, epochs=1, batch_size=16, lr=1e-4), picked,
                        progress=False)
    trained.save(directory, version=version, metrics={}, thresholds={}, data_fingerprint="")
    return Path(directory)


def promote_model(database_url: str, model_dir, source_dir, scope: str = "global", *, reason: str = "test") -> str:
    """Register a copy of `source_dir` in the registry at `model_dir` and make it serve `scope`; its version."""
    from core.db import make_sessionmaker, session_scope
    from trainer.registry import Registry

    with session_scope(make_sessionmaker(database_url)) as session:
        registry = Registry(model_dir, session)  # registering builds no fast path: PyTorch serves the bot's tests
        row = registry.register(source_dir, scope=scope)
        registry.promote(row.version, reason, scope=scope)
        return row.version
