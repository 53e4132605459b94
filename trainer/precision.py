"""Training precision on CPU, decided once per kind of CPU: bf16 autocast where a measurement on that kind
showed it trains as well as fp32, else fp32.

Whether bf16 autocast keeps fp32's quality, and how much time it saves, is a property of the CPU's bf16
instructions (AMX, AVX-512 BF16), not of the model or the issues. So it is measured once per CPU kind (its
maker and the instruction flags that bear on bf16: `CpuKind`; CPU models with the same flags train alike)
by a short training of both precisions on the same issues (`measure_verdict`), kept in the model
directory's precision-verdicts.json, and read by every training after it: bootstrap-model, train, select
and each retraining train once. Verdicts measured on known CPU kinds ship with the project
(`SHIPPED_VERDICTS`); `issue-sorter measure-precision` measures this machine's again. A CPU without bf16
instructions trains fp32 and needs no verdict; `--precision fp32|bf16` trains as asked.
The card records the precision and the verdict it followed (`training.precision_verdict`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.engines import has_bf16
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.evaluate import evaluate_classifier
from trainer.train import TrainedModel, fine_tune

log = logging.getLogger(__name__)

NOISE_Z = 1.96  # two-sided 95 %: a difference smaller than this many standard errors is noise
MIN_STANDARD_ERROR = 0.005  # half a point, whatever the issue count: the floor of what counts as noise
BF16_FLAGS = ("avx512f", "avx512_bf16", "amx_tile", "amx_bf16")  # the flags a verdict's CPU kind is keyed by
VERDICTS_FILE = "precision-verdicts.json"  # under the model directory: this App's own measurements
SHIPPED_VERDICTS = Path(__file__).with_name("precision_verdicts.json")  # measured on known CPU kinds


@dataclasses.dataclass(frozen=True)
class CpuKind:
    """What a precision verdict depends on: the CPU's maker and its bf16 instruction flags. Not its model
    number: bf16 autocast runs the same kernels on every model with the same flags."""

    vendor: str  # /proc/cpuinfo's vendor_id: GenuineIntel, AuthenticAMD
    flags: frozenset[str]  # every flag; only BF16_FLAGS enter the key

    @property
    def key(self) -> str:
        return " ".join([self.vendor, *(flag for flag in BF16_FLAGS if flag in self.flags)])

    @classmethod
    def from_cpuinfo(cls, text: str) -> CpuKind:
        """The first processor of a /proc/cpuinfo text."""
        fields: dict[str, str] = {}
        for line in text.split("\n\n")[0].splitlines():
            name, _, value = line.partition(":")
            fields.setdefault(name.strip(), value.strip())
        return cls(fields.get("vendor_id", "unknown"), frozenset(fields.get("flags", "").split()))


def this_cpu(path: Path = Path("/proc/cpuinfo")) -> CpuKind:
    """This machine's CPU kind (Linux); an unknown kind without flags elsewhere."""
    try:
        return CpuKind.from_cpuinfo(path.read_text())
    except OSError:
        return CpuKind("unknown", frozenset())


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a short training of both precisions on one CPU kind showed."""

    cpu: str  # CpuKind.key
    precision: str  # what trains there: bf16 when it held against fp32, else fp32
    speedup: float  # fp32's training time over bf16's
    macro_f1_bf16: float
    macro_f1_fp32: float
    issues: int  # held-out issues both were scored on
    noise: float  # the difference that counted as noise on that many issues
    steps: int  # optimizer steps each precision trained
    measured: str  # when, UTC, ISO 8601
    source: str = "measured here"  # or "shipped with Issue Sorter"

    def to_dict(self) -> dict[str, Any]:
        return {name: value for name, value in dataclasses.asdict(self).items() if name != "source"}


@dataclasses.dataclass(frozen=True)
class Verdicts:
    """The verdicts this App measured (`path`; None: none kept) before those shipped with the project."""

    path: Path | None
    shipped: Path = SHIPPED_VERDICTS

    @classmethod
    def under(cls, model_dir: Path | str) -> Verdicts:
        return cls(Path(model_dir) / VERDICTS_FILE)

    def find(self, kind: CpuKind) -> Verdict | None:
        """The verdict for `kind`: this App's own, else a shipped one, else None."""
        for path, source in ((self.path, "measured here"), (self.shipped, "shipped with Issue Sorter")):
            found = _read(path).get(kind.key) if path is not None else None
            if found is None:
                continue
            known = {field.name for field in dataclasses.fields(Verdict)} - {"source"}
            try:
                return Verdict(**{name: value for name, value in found.items() if name in known}, source=source)
            except TypeError as error:  # a field missing
                raise ValueError(f"{path}: the verdict for {kind.key} is incomplete ({error}): delete it, and "
                                 "the next training or `issue-sorter measure-precision` measures again") from error
        return None

    def record(self, verdict: Verdict) -> None:
        """Keep `verdict` for its CPU kind (replacing an older one), beside those of other kinds."""
        if self.path is None:
            return
        kept = _read(self.path) | {verdict.cpu: verdict.to_dict()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")
        os.replace(partial, self.path)  # whole or not at all: a reader never sees half a file


def _read(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        verdicts = json.loads(path.read_text())
        if not isinstance(verdicts, dict) or not all(isinstance(row, dict) for row in verdicts.values()):
            raise ValueError("not an object of CPU kinds")
        return verdicts
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not a precision verdicts file ({error}): delete it, and the next "
                         "training or `issue-sorter measure-precision` measures this CPU again") from error


@dataclasses.dataclass(frozen=True)
class MeasureOptions:
    """The short run that measures a verdict."""

    steps: int = 48  # optimizer steps each precision trains (steps × batch size issues)
    held_out: int = 400  # issues, set aside before training, that both models are scored on
    min_issues: int = 100  # fewer issues than this: nothing measured, fp32 trains


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    """How a training's precision is chosen: the verdicts read and kept, for which CPU, measured how."""

    verdicts: Verdicts = Verdicts(None)  # trainer.pipeline keeps them under the registry's model directory
    cpu: CpuKind | None = None  # None: this machine's
    measure: MeasureOptions = MeasureOptions()


def noise(f1: float, issues: int) -> float:
    """How far two macro-F1s on `issues` held-out issues may differ by chance (a binomial's standard error
    at that score, times NOISE_Z)."""
    return NOISE_Z * max(math.sqrt(max(f1 * (1 - f1), 0.0) / max(issues, 1)), MIN_STANDARD_ERROR)


def bf16_holds(f1_bf16: float, f1_fp32: float, issues: int) -> bool:
    """bf16 training lost no more than noise against fp32 training on the same issues."""
    return f1_bf16 >= f1_fp32 - noise(f1_fp32, issues)


def held_out_f1(trained: TrainedModel, held_out: Sequence[Example]) -> float:
    return evaluate_classifier(trained.classifier(), held_out, labels=trained.labels)["macro_f1"]


def speedup(bf16: TrainedModel, fp32: TrainedModel) -> float:
    """fp32's time over bf16's: their median steps where both timed each one. Both took the same batches in
    the same order, and a median leaves out the first steps, which the run measured first pays for (new
    tensor shapes, memory touched for the first time), enough to turn whole runs' ratio around
    (docs/BENCHMARKS.md, "Training per precision")."""
    if bf16.step_seconds and fp32.step_seconds:
        return round(statistics.median(fp32.step_seconds) / max(statistics.median(bf16.step_seconds), 1e-9), 2)
    return round(fp32.seconds / max(bf16.seconds, 1e-9), 2)


def measure_verdict(config: TrainConfig, examples: Sequence[Example], kind: CpuKind, *,
                    options: MeasureOptions = MeasureOptions(), progress: bool = False,
                    train: Callable[..., TrainedModel] = fine_tune,
                    score: Callable[[TrainedModel, Sequence[Example]], float] = held_out_f1) -> Verdict:
    """Train `config`'s model for `options.steps` steps in bf16 and in fp32 on the same issues of `examples`,
    score both on issues set aside from them, and time both."""
    shuffled = random.Random(config.seed).sample(list(examples), len(examples))
    set_aside = min(options.held_out, len(shuffled) // 3)
    held_out, pool = shuffled[:set_aside], shuffled[set_aside:]
    taught = pool[:options.steps * config.batch_size]
    labels = sorted({example.label for example in examples})
    learnt = {example.label for example in taught}
    held_out = [example for example in held_out if example.label in learnt]
    if len(learnt) < 2 or not held_out:
        raise ValueError(f"{len(examples)} issues are too few to measure bf16 against fp32 on: give more")
    short = dataclasses.replace(config, epochs=1, max_steps=options.steps)
    runs = {precision: train(short, taught, labels, progress=progress, precision=precision)
            for precision in ("bf16", "fp32")}
    f1 = {precision: score(trained, held_out) for precision, trained in runs.items()}
    holds = bf16_holds(f1["bf16"], f1["fp32"], len(held_out))
    verdict = Verdict(kind.key, "bf16" if holds else "fp32", speedup(runs["bf16"], runs["fp32"]), round(f1["bf16"], 4),
                      round(f1["fp32"], 4), len(held_out), round(noise(f1["fp32"], len(held_out)), 4),
                      runs["bf16"].steps, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    log.log(logging.INFO if holds else logging.WARNING, "precision on %s: bf16 macro-F1 %.4f against fp32's "
            "%.4f on %d issues (noise %.4f), %.2fx fp32's speed: %s trains here from now on", kind.key,
            f1["bf16"], f1["fp32"], len(held_out), verdict.noise, verdict.speedup, verdict.precision)
    return verdict


def fine_tune_for_cpu(config: TrainConfig, examples: Sequence[Example], labels: Sequence[str] | None, *,
                      choice: PrecisionChoice = PrecisionChoice(), progress: bool = True,
                      train: Callable[..., TrainedModel] = fine_tune,
                      score: Callable[[TrainedModel, Sequence[Example]], float] = held_out_f1) -> TrainedModel:
    """`train` once, in the precision the CPU's verdict says; auto on a CPU with bf16 instructions and no
    verdict yet measures one first (`measure_verdict`, on `examples`) and keeps it in `choice.verdicts`."""
    kind = choice.cpu or this_cpu()
    verdict = reason = None
    if config.precision != "auto":  # the operator's choice
        reason = f"precision {config.precision} was asked for (TrainConfig.precision)"
    elif config.resolved_device() != "cpu":
        reason = f"trained on {config.resolved_device()} (float16 autocast there): no CPU bf16"
    elif not has_bf16(kind.flags):
        reason = "this CPU has no bf16 instructions (AMX or AVX-512 BF16): fp32"
    elif (verdict := choice.verdicts.find(kind)) is None and (choice.verdicts.path is None
                                                              or len(examples) < choice.measure.min_issues):
        why = "nowhere to keep one" if choice.verdicts.path is None else "too few issues to measure one on"
        reason = f"no precision verdict for {kind.key} and {why}: fp32 (`issue-sorter measure-precision`)"
    if reason is not None:  # trained without a verdict, with the reason none was read
        precision = config.precision if config.precision != "auto" else "fp32"
        trained = train(config, examples, labels, progress=progress, precision=precision)
        trained.precision_verdict = {"kept": trained.precision, "reason": reason}
        log.info("trained in %s: %s", trained.precision, reason)
        return trained
    if verdict is None:
        verdict = measure_verdict(config, examples, kind, options=choice.measure, progress=progress, train=train,
                                  score=score)
        choice.verdicts.record(verdict)
    trained = train(config, examples, labels, progress=progress, precision=verdict.precision)
    trained.precision_verdict = {"kept": trained.precision, **verdict.to_dict(), "source": verdict.source}
    log.info("trained in %s, as this CPU's verdict says (%s, %s)", trained.precision, verdict.source,
             verdict.measured)
    return trained
