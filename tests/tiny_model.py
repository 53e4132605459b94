"""The tiny model: all-MiniLM-L6-v2 fine-tuned for one short epoch on 48 real NLBSE issues, 16 each of bug,
feature and question. The tests' `tiny_model_dir` and the benchmarks that need a served model but do not
measure its accuracy (bench.latency, bench.scale, bench.chaos) train it here."""

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
