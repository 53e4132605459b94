"""Training precision on CPU: bf16 autocast where the CPU has bf16 instructions, kept only if it trains as
well as fp32.

With AMX (flag `amx_bf16`) torch's CPU autocast trains MiniLM about 1.3x faster (issue 30); with AVX-512 BF16
alone (Zen 4) it trained 2.0x faster here (bench.training_precision: docs/BENCHMARKS.md, "Training
precision"); without either, bf16 is emulated and fp32 trains. Rounding the activations to bf16 may cost
quality, so a model trained in bf16 is kept only when its macro-F1 on the registration's held-out issues is
within noise of an fp32 training of the same recipe (`bf16_holds`); otherwise the fp32 one is. The card
records the precision used and the gate's figures (`training.precision`, `training.precision_gate`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

from core.engines import cpu_flags as this_cpu, has_bf16
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.evaluate import evaluate_classifier
from trainer.train import TrainedModel, fine_tune

log = logging.getLogger(__name__)

NOISE_Z = 1.96  # two-sided 95 %: a difference smaller than this many standard errors is noise
MIN_STANDARD_ERROR = 0.005  # half a point, whatever the issue count: the floor of what counts as noise


def precision_for(config: TrainConfig, flags: frozenset[str] | None = None) -> str:
    """fp32 or bf16 for `config` on a CPU with `flags` (None: this machine's): auto is bf16 where the CPU
    has bf16 instructions (AMX or AVX-512 BF16)."""
    if config.precision != "auto":
        return config.precision
    return "bf16" if has_bf16(this_cpu() if flags is None else flags) else "fp32"


def noise(f1: float, issues: int) -> float:
    """How far two macro-F1s on `issues` held-out issues may differ by chance (a binomial's standard error
    at that score, times NOISE_Z)."""
    return NOISE_Z * max(math.sqrt(max(f1 * (1 - f1), 0.0) / max(issues, 1)), MIN_STANDARD_ERROR)


def bf16_holds(f1_bf16: float, f1_fp32: float, issues: int) -> bool:
    """The gate: bf16 training lost no more than noise against fp32 training on the same issues."""
    return f1_bf16 >= f1_fp32 - noise(f1_fp32, issues)


def held_out_f1(trained: TrainedModel, held_out: Sequence[Example]) -> float:
    return evaluate_classifier(trained.classifier(), held_out, labels=trained.labels)["macro_f1"]


def fine_tune_gated(config: TrainConfig, examples: Sequence[Example], labels: Sequence[str] | None,
                    held_out: Sequence[Example], *, flags: frozenset[str] | None = None, progress: bool = True,
                    train: Callable[..., TrainedModel] = fine_tune,
                    score: Callable[[TrainedModel, Sequence[Example]], float] = held_out_f1) -> TrainedModel:
    """`train` in the precision this CPU should use; a bf16 model only if it matches fp32's on `held_out`
    (without held-out issues bf16 cannot be checked: fp32). The verdict is in `precision_gate`."""
    precision = precision_for(config, flags)
    if precision == "fp32" or not held_out:
        trained = train(config, examples, labels, progress=progress, precision="fp32")
        if precision == "bf16":
            trained.precision_gate = {"kept": "fp32", "reason": "no held-out issues to check bf16 on"}
        return trained
    bf16 = train(config, examples, labels, progress=progress, precision="bf16")
    fp32 = train(config, examples, labels, progress=progress, precision="fp32")
    f1_bf16, f1_fp32 = score(bf16, held_out), score(fp32, held_out)
    holds = bf16_holds(f1_bf16, f1_fp32, len(held_out))
    kept = bf16 if holds else fp32
    kept.precision_gate = {"kept": kept.precision, "passed": holds, "issues": len(held_out),
                           "macro_f1_bf16": round(f1_bf16, 4), "macro_f1_fp32": round(f1_fp32, 4),
                           "noise": round(noise(f1_fp32, len(held_out)), 4),
                           "seconds_bf16": round(bf16.seconds, 1), "seconds_fp32": round(fp32.seconds, 1)}
    log.log(logging.INFO if holds else logging.WARNING, "bf16 training %s: macro-F1 %.4f against fp32's %.4f "
            "on %d held-out issues (noise %.4f); %s kept", "holds" if holds else "lost quality", f1_bf16,
            f1_fp32, len(held_out), kept.precision_gate["noise"], kept.precision)
    return kept
