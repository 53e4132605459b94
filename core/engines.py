"""Which engine runs a registered encoder on this machine: the gate at registration says which may, the CPU
where the worker runs says which of those is fastest, and a setting may force one.

Engines, by the names the card and the logs use:
- `onnxruntime-int8`: the fused graph with int8 weights (trainer.fast_path); VNNI runs it natively.
- `onnxruntime-fp32`: the same fused graph in fp32: PyTorch's answers to ~1e-6, no torch in the worker.
- `pytorch-bf16`: PyTorch under CPU autocast to bfloat16: fast where AMX multiplies bf16 tiles.
- `pytorch`: PyTorch in fp32, the reference every gate compares with; always allowed, the last fallback.

An engine serves only when its registration's gate passed (recorded in the card's `fast_path.gates`) and it
loads here; otherwise the next one is tried and one log line says why. The choice of each worker is kept in
Redis (ENGINES_KEY) so that GET /metrics names it, whichever machine the worker runs on.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from core.card import ModelCard

log = logging.getLogger(__name__)

ORT_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32 = "onnxruntime-int8", "onnxruntime-fp32", "pytorch-bf16", "pytorch"
ENGINES = (ORT_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32)
AUTO = "auto"  # ISSUE_SORTER_ENGINE's default: the CPU's order below
ENGINES_KEY = "issue-sorter:metrics:engines"  # field "host:pid|scope" → "version|engine" of a live worker
WARMED_KEY = "issue-sorter:workers:warmed"  # field "host:pid" → ms its warm-up took: ready for a first job

# Fastest first, by measurement (docs/BENCHMARKS.md, "Serving"): with AMX, bf16 autocast runs MiniLM at
# ~2.9x its fp32 speed (issue 30's figures); without it bf16 is emulated by avx512_bf16 converts and loses
# to fp32, and ORT's int8 leads (VNNI or not: 7-bit weights keep AVX2's u8s8 kernels from saturating).
ORDER_WITH_AMX = (TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
ORDER_WITHOUT_AMX = (ORT_INT8, ORT_FP32, TORCH_FP32)


class EngineRefused(RuntimeError):
    """An engine that may not serve this model here (its gate failed, or it was never gated)."""


@dataclass(frozen=True)
class Choice:
    """The engine that serves, and why each engine before it did not (engine → one-line reason)."""

    engine: str
    classifier: Any
    passed_over: dict[str, str]


@lru_cache(maxsize=1)
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (Linux); empty where /proc/cpuinfo is not."""
    try:
        text = Path(path).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def has_amx(flags: Iterable[str]) -> bool:
    """AMX's bf16 tiles: what makes bf16 autocast pay, for serving and for training."""
    return "amx_bf16" in set(flags)


def has_bf16(flags: Iterable[str]) -> bool:
    """Any bf16 instruction (AMX or AVX-512 BF16): a bf16 engine can at least run at a useful speed."""
    flags = set(flags)
    return "amx_bf16" in flags or "avx512_bf16" in flags


def preference(flags: Iterable[str]) -> tuple[str, ...]:
    """The engines to try on a CPU with these flags, fastest first."""
    return ORDER_WITH_AMX if has_amx(flags) else ORDER_WITHOUT_AMX


def order(forced: str, flags: Iterable[str]) -> tuple[str, ...]:
    """The engines to try, in turn: a forced one first, then the CPU's order; fp32 PyTorch always last."""
    if forced not in (AUTO, *ENGINES):
        raise ValueError(f"an engine is one of {', '.join((AUTO, *ENGINES))}, not {forced!r}")
    tried = ([] if forced == AUTO else [forced]) + [engine for engine in preference(flags) if engine != forced]
    return tuple(tried) if TORCH_FP32 in tried else (*tried, TORCH_FP32)


def refusal(card: ModelCard, engine: str) -> str | None:
    """Why the card's registration does not allow `engine` (None: allowed). fp32 PyTorch needs no gate."""
    if engine == TORCH_FP32:
        return None
    record = card.fast_path
    if not record:
        return "no fast path was built for it (registered before the fast path, or with it off)"
    if record.get("error") and engine != TORCH_BF16:
        return f"its fast artefact could not be built ({record['error']})"
    gate = record.get("gates", {}).get(engine)
    if gate is None and engine == record.get("serves"):
        gate = record.get("gate")  # a card written before every engine had its gate recorded
    if not gate:
        return "its registration did not gate it"
    if not gate.get("passed"):
        return f"its registration's same-answers gate refused it ({gate_text(gate)})"
    if engine in (ORT_INT8, ORT_FP32) and engine not in artefacts(card):
        return "its registration kept no artefact for it"
    return None


def artefacts(card: ModelCard) -> dict[str, dict[str, str]]:
    """ONNX artefacts the card keeps, by engine: {"file": relative path, "sha256": ...}."""
    record = card.fast_path
    kept = dict(record.get("artefacts") or {})
    if not kept and record.get("file") and record.get("serves") in (ORT_INT8, ORT_FP32):
        kept[record["serves"]] = {"file": record["file"], "sha256": record.get("sha256", "")}
    return kept


def gate_text(gate: Mapping[str, Any]) -> str:
    if "top_label_agreement" not in gate:
        return str(gate.get("reason", "not run"))
    text = (f"top label agreed on {gate['top_label_agreement']:.1%} of {gate['issues']} issues, macro-F1 "
            f"{gate['macro_f1_fast']:.4f} against PyTorch's {gate['macro_f1_pytorch']:.4f}")
    if "memory_agreement" in gate:
        text += f", with the memory {gate['memory_agreement']:.1%}"
    return text


Loader = Callable[[str], Any]  # engine → a loaded classifier; raises to say it cannot load here


def choose(card: ModelCard, load: Loader, *, forced: str = AUTO, flags: Iterable[str] | None = None) -> Choice:
    """The first engine of `order(forced, flags)` that the card allows and that loads; each one passed over
    is logged with its reason. fp32 PyTorch, last, is allowed always: its failure to load is raised."""
    flags = cpu_flags() if flags is None else frozenset(flags)
    passed_over: dict[str, str] = {}
    for engine in order(forced, flags):
        why = refusal(card, engine)
        if why is None:
            try:
                classifier = load(engine)
            except Exception as error:  # noqa: BLE001 - a missing library, a corrupt file, ORT's own errors
                if engine == TORCH_FP32:
                    raise
                why = f"it could not be loaded ({type(error).__name__}: {error})"
            else:
                level = logging.WARNING if forced not in (AUTO, engine) else logging.INFO
                log.log(level, "serving %s with %s (%s; CPU %s)", card.version, engine,
                        describe(forced, engine, passed_over), cpu_summary(flags))
                return Choice(engine, classifier, passed_over)
        passed_over[engine] = why
        log.warning("%s does not serve %s: %s", engine, card.version, why)
    raise AssertionError("unreachable: fp32 PyTorch is always tried")


def describe(forced: str, engine: str, passed_over: Mapping[str, str]) -> str:
    chosen = {AUTO: "the CPU's fastest allowed", engine: "forced by ISSUE_SORTER_ENGINE"}.get(
        forced, f"ISSUE_SORTER_ENGINE asked for {forced}")
    if passed_over:
        chosen += "; passed over: " + ", ".join(passed_over)
    return chosen


def cpu_summary(flags: Iterable[str]) -> str:
    """The flags that decide the choice, as one word each."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    present = [flag for flag in wanted if flag in set(flags)]
    return " ".join(present) or "without AVX2"


def process_name() -> str:
    """host:pid, as RQ names a worker's machine and process (bot.metrics matches live workers by it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def record_engine(redis, scope: str, version: str, engine: str, process: str | None = None) -> None:
    """This worker serves `scope` with `version` on `engine` (GET /metrics reads it); Redis errors only log."""
    try:
        redis.hset(ENGINES_KEY, f"{process or process_name()}|{scope}", f"{version}|{engine}")
    except RedisError as error:
        log.warning("could not record the serving engine in Redis: %s", error)


def record_warmed(redis, milliseconds: float, process: str | None = None) -> None:
    """This worker's models are loaded and warmed up: its first job pays for neither (`issue-sorter run`
    may wait for it before saying the service is up)."""
    try:
        redis.hset(WARMED_KEY, process or process_name(), f"{milliseconds:.0f}")
    except RedisError as error:
        log.warning("could not record the warm-up in Redis: %s", error)


def served_engine(classifier: Any) -> str | None:
    """The engine of a loaded classifier (a blend's: its encoder's); None for a model without an encoder."""
    encoder = getattr(classifier, "encoder", classifier)
    engine = getattr(encoder, "engine", None)
    return engine if engine in ENGINES else None
