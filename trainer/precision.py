"""Training precision on CPU: bf16 autocast where the CPU has bf16 instructions, kept only if it trains as
well as fp32.

With AMX (flag `amx_bf16`) torch's CPU autocast trains MiniLM about 1.3x faster (issue 30); with AVX-512 BF16
alone (Zen 4) it trained 1.6x faster here (docs/BENCHMARKS.md, "Training per precision"); without either,
bf16 is emulated and fp32 trains. Rounding the activations to bf16 may cost
quality, so a model trained in bf16 is kept only when its macro-F1 on the registration's held-out issues is
within noise of an fp32 training of the same recipe (`bf16_holds`); otherwise the fp32 one is. The card
records the precision used and the gate's figures, or why no gate ran (`training.precision`,
`training.precision_gate`). Every training that registers a model comes through `fine_tune_gated`
(trainer.blend.train_model, called by trainer.pipeline for bootstrap-model, train, select and retraining),
judged on the issues its registration holds out. A retraining continues from a registered model: where that
model's card shows bf16 training passed its gate (or inherited a pass), bf16 trains alone (`inherited_gate`):
the retraining's own comparison with the champion still judges the model before it serves.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.card import MODEL_CARD, read_card
from core.engines import cpu_flags as this_cpu
from core.engines import has_bf16
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


def inherited_gate(config: TrainConfig) -> dict[str, Any] | None:
    """The bf16 pass `config`'s base model carries: its card (a registered encoder's directory, as a retraining
    continues from) shows bf16 kept by a gate that passed there, or by one it inherited; else None (a hub
    model, a card without a gate, fp32 kept, a gate that refused bf16)."""
    if not config.base_model or not (Path(config.base_model) / MODEL_CARD).is_file():
        return None
    try:
        card = read_card(config.base_model)
    except (OSError, ValueError):  # unreadable or not JSON: no pass to inherit, the gate runs
        return None
    training = card.get("training") or {}
    gate = training.get("precision_gate") or {}
    if training.get("precision") != "bf16" or gate.get("kept") != "bf16":
        return None
    if gate.get("passed") is True:
        return {"passed_at": card.get("version") or str(config.base_model), "issues": gate.get("issues"),
                "macro_f1_bf16": gate.get("macro_f1_bf16"), "macro_f1_fp32": gate.get("macro_f1_fp32")}
    if isinstance(gate.get("inherited"), dict):
        return gate["inherited"]
    return None


def held_out_f1(trained: TrainedModel, held_out: Sequence[Example]) -> float:
    return evaluate_classifier(trained.classifier(), held_out, labels=trained.labels)["macro_f1"]


def fine_tune_gated(config: TrainConfig, examples: Sequence[Example], labels: Sequence[str] | None,
                    held_out: Sequence[Example], *, flags: frozenset[str] | None = None, progress: bool = True,
                    train: Callable[..., TrainedModel] = fine_tune,
                    score: Callable[[TrainedModel, Sequence[Example]], float] = held_out_f1) -> TrainedModel:
    """`train` in the precision this CPU should use; an auto bf16 model only if it matches fp32's on
    `held_out` (the issues of `held_out` with a label it learns; without any, bf16 cannot be checked: fp32).

    The gate trains twice, bf16 and fp32: 1.5x fp32's time alone where bf16 trains 2x as fast (Zen 4), 1.8x
    where 1.3x (AMX), so auto's gate buys a checked bf16 model, not time; what each took is in the verdict.
    The verdict, or why no gate ran, is the model's `precision_gate` (the card's `training.precision_gate`)."""
    precision = precision_for(config, flags)
    if config.precision != "auto":  # the operator's choice, trained alone
        return _alone(train(config, examples, labels, progress=progress, precision=precision),
                      f"precision {precision} was asked for (TrainConfig.precision): trained alone, not gated")
    if config.resolved_device() != "cpu":
        return _alone(train(config, examples, labels, progress=progress, precision="fp32"),
                      f"trained on {config.resolved_device()} (float16 autocast there): no CPU bf16 to gate")
    if precision == "fp32":
        return _alone(train(config, examples, labels, progress=progress, precision="fp32"),
                      "this CPU has no bf16 instructions (AMX or AVX-512 BF16): fp32 trained alone, no gate")
    inherited = inherited_gate(config)
    if inherited is not None:  # the retraining's own comparison with the champion still judges it
        trained = train(config, examples, labels, progress=progress, precision="bf16")
        return _alone(trained, f"its base model's bf16 training passed its gate ({inherited['passed_at']}): "
                      "bf16 trained alone", inherited=inherited)
    learnt = set(labels) if labels is not None else {example.label for example in examples}
    held_out = [example for example in held_out if example.label in learnt]
    if not held_out:
        return _alone(train(config, examples, labels, progress=progress, precision="fp32"),
                      "no held-out issues to check bf16 on: fp32 trained alone")
    bf16 = train(config, examples, labels, progress=progress, precision="bf16")
    fp32 = train(config, examples, labels, progress=progress, precision="fp32")
    f1_bf16, f1_fp32 = score(bf16, held_out), score(fp32, held_out)
    holds = bf16_holds(f1_bf16, f1_fp32, len(held_out))
    kept = bf16 if holds else fp32
    kept.precision_gate = {"kept": kept.precision, "passed": holds, "issues": len(held_out),
                           "macro_f1_bf16": round(f1_bf16, 4), "macro_f1_fp32": round(f1_fp32, 4),
                           "noise": round(noise(f1_fp32, len(held_out)), 4),
                           "seconds_bf16": round(bf16.seconds, 1), "seconds_fp32": round(fp32.seconds, 1),
                           "seconds_both": round(bf16.seconds + fp32.seconds, 1)}
    log.log(logging.INFO if holds else logging.WARNING, "bf16 training %s: macro-F1 %.4f against fp32's %.4f "
            "on %d held-out issues (noise %.4f); %s kept. The gate trained both precisions: %.0f s in all "
            "(bf16 %.0f s, fp32 %.0f s)", "holds" if holds else "lost quality", f1_bf16, f1_fp32,
            len(held_out), kept.precision_gate["noise"], kept.precision, bf16.seconds + fp32.seconds,
            bf16.seconds, fp32.seconds)
    return kept


def _alone(trained: TrainedModel, reason: str, **more: Any) -> TrainedModel:
    """A model trained in one precision only, with the reason no gate ran."""
    trained.precision_gate = {"kept": trained.precision, "reason": reason, **more}
    log.info("trained in %s: %s", trained.precision, reason)
    return trained
