"""Which engine runs a registered encoder on this machine: the gate at registration says which may, the CPU
where the worker runs says which of those is fastest, and a setting may force one.

Each engine (`TABLE`, by the name the card and the logs use) is described once, below: what it runs, what it
needs, how it is loaded (core.encoder.load_engine) and gated (trainer.fast_path). fp32 PyTorch is the
reference every gate compares with; always allowed, the last fallback. Where PyTorch sees an NVIDIA GPU, it
serves, on the GPU: faster there than any CPU engine, and than bf16 autocast on the GPU (docs/BENCHMARKS.md,
"On a GPU").

An engine serves only when its registration's gate passed (recorded in the card's `fast_path.gates`) and it
loads here; otherwise the next one is tried and one log line says why. Which of the allowed ones serves comes
from the CPU's flags (`preference`), or, with ISSUE_SORTER_ENGINE=measure, from timing each of them on a few
fixed issues once the worker has started (`MeasuredChoice`). The choice of each worker is kept in Redis
(ENGINES_KEY) so that GET /metrics names it, whichever machine the worker runs on.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from core.card import ModelCard

log = logging.getLogger(__name__)

ORT_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32 = "onnxruntime-int8", "onnxruntime-fp32", "pytorch-bf16", "pytorch"
OV_INT8, OV_BF16 = "openvino-int8", "openvino-bf16"
FAST_DIR = "fast"  # the ONNX artefacts' subdirectory in an encoder's version directory
FAST_FILE = "model.int8.onnx"  # fused graph (ORT's BERT optimizer), dynamic int8 weights (per channel)
FP32_FILE = "model.fp32.onnx"  # the same fused graph in fp32
STATIC_INT8_FILE = "model.int8-static.onnx"  # the unfused graph, int8 weights and calibrated activations (QDQ)


@dataclass(frozen=True)
class Engine:
    """One way to run a registered encoder."""

    name: str
    graph: str | None = None  # the ONNX file under FAST_DIR it runs (None: PyTorch runs the weights)
    openvino: bool = False  # OpenVINO compiles the graph for this CPU, else ONNX Runtime runs it
    bf16: bool = False  # infers in bf16: gated and served only where the CPU has bf16 instructions


TABLE = {engine.name: engine for engine in (
    # int8 weights and activations, calibrated on training issues (trainer.static_int8); AMX and VNNI
    # multiply int8 natively
    Engine(OV_INT8, STATIC_INT8_FILE, openvino=True),
    Engine(OV_BF16, FP32_FILE, openvino=True, bf16=True),  # the fused fp32 graph, inferring in bf16
    Engine(ORT_INT8, FAST_FILE),  # VNNI runs it natively
    Engine(ORT_FP32, FP32_FILE),  # PyTorch's answers to ~1e-6, no torch in the worker
    # autocast to bfloat16 (on the CPU, or the GPU where the model runs there): faster than fp32 PyTorch
    # where AMX or AVX-512 BF16 multiply bf16, slower than OpenVINO's bf16 on both; emulated, and slow,
    # without either
    Engine(TORCH_BF16, bf16=True),
    Engine(TORCH_FP32),
)}
ENGINES = tuple(TABLE)
AUTO = "auto"  # ISSUE_SORTER_ENGINE's default: the CPU's order below
MEASURE = "measure"  # ISSUE_SORTER_ENGINE=measure: time every allowed engine at worker start, serve the fastest
CHOICES = (AUTO, MEASURE, *ENGINES)  # what ISSUE_SORTER_ENGINE may say
ENGINES_KEY = "issue-sorter:metrics:engines"  # field "host:pid|scope" → "version|engine" of a live worker
WARMED_KEY = "issue-sorter:workers:warmed"  # field "host:pid" → ms its warm-up took: ready for a first job

# Fastest first, by measurement (docs/BENCHMARKS.md, "Serving"), one issue at a time as a labelling job runs:
# - AMX: OpenVINO's bf16, then its static int8 (slower than its bf16 one issue at a time: the activations'
#   quantisation costs more than int8 tiles save on an issue's few tokens), then bf16 autocast.
# - AVX-512 BF16 without AMX (AMD Zen 4 and 5): ONNX Runtime's int8 (VNNI), then OpenVINO's bf16 (a tie on
#   two threads on a Zen 4 and a Zen 5, int8 ahead on one), then its static int8, all twice ONNX Runtime's
#   fp32 or more; then ONNX Runtime's fp32 (PyTorch's answers to 1e-6, in less memory than bf16 autocast,
#   which ties or beats it).
# - Neither: bf16 is emulated, slower than fp32: never tried unless forced or measured. OpenVINO's int8 is
#   slower there than ONNX Runtime's fp32 (its kernels want VNNI or AMX; on an AVX2-only Zen 3, 28.3
#   against 41.0 issues/s in batches): ISSUE_SORTER_ENGINE=measure still times it.
ORDER_WITH_AMX = (OV_BF16, OV_INT8, TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
ORDER_WITH_AVX512_BF16 = (ORT_INT8, OV_BF16, OV_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32)
ORDER_WITHOUT_BF16 = (ORT_INT8, ORT_FP32, TORCH_FP32)
# - An NVIDIA GPU that PyTorch can use (bench.cuda --served): fp32 on the GPU beats bf16 autocast there (tiny
#   kernels: the casts cost more than they save) and every CPU engine: PyTorch fp32 on the GPU alone.
ORDER_WITH_GPU = (TORCH_FP32,)
NVIDIA_CONTROL_DEVICE = Path("/dev/nvidiactl")  # present wherever NVIDIA's driver runs a GPU
# ISSUE_SORTER_ENGINE=measure: each allowed engine labels these one at a time (as a job does), once to warm
# up, then MEASURE_ROUNDS times; its best round counts. Short, typical and past-the-token-limit issues.
MEASURE_TEXTS = (
    "Crash on startup\n\nThe app exits with a segmentation fault right after launch on Windows 11.",
    ("Add a dark mode\n\nIt would be great to have a dark theme for the settings page, following the "
     "system preference, with a toggle to override it."),
    ("How do I configure a proxy?\n\nI am behind a corporate proxy and cannot find in the docs where the "
     "HTTP proxy goes. Is there an environment variable for it, or a setting in the config file?"),
    "TypeError when saving a file with a unicode name\n\n" + "Traceback (most recent call last):\n"
    '  File "app/storage.py", line 88, in save\n    handle.write(encode(name, payload))\n' * 12
    + "TypeError: expected str, bytes or os.PathLike object, not NoneType",
)
MEASURE_ROUNDS = 3
MEASURE_MARGIN = 0.05  # an engine earlier in the CPU's order keeps its place unless another is 5 % faster


@dataclass(frozen=True)
class Choice:
    """The engine that serves, and why each engine before it did not (engine → one-line reason)."""

    engine: str
    classifier: Any
    passed_over: dict[str, str]


@dataclass(frozen=True)
class Hardware:
    """What orders the engines where a model serves: the CPU's instruction-set flags, and whether PyTorch
    sees an NVIDIA GPU. `this_machine()` probes them once per process; tests describe other machines."""

    cpu_flags: frozenset[str] = frozenset()
    gpu: bool = False


@lru_cache(maxsize=1)
def this_machine() -> Hardware:
    """The hardware this process runs on, probed on first use."""
    return Hardware(cpu_flags(), cuda_available())


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


def has_bf16(flags: Iterable[str]) -> bool:
    """Any bf16 instruction (AMX or AVX-512 BF16): bf16 autocast then runs natively, not emulated; it serves
    and trains faster than fp32 PyTorch on both (the orders above; trainer.precision)."""
    flags = set(flags)
    return "amx_bf16" in flags or "avx512_bf16" in flags


def cuda_available(control: Path = NVIDIA_CONTROL_DEVICE) -> bool:
    """Whether PyTorch can run the model on an NVIDIA GPU here. Without the driver's control device torch is
    not imported, so a worker on a CPU machine that serves with ONNX Runtime stays without it."""
    if not control.exists():
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def preference(flags: Iterable[str], *, gpu: bool = False) -> tuple[str, ...]:
    """The engines to try on a CPU with these flags (and a GPU that PyTorch can use), fastest first."""
    if gpu:
        return ORDER_WITH_GPU
    flags = set(flags)
    if "amx_bf16" in flags:  # AMX's bf16 tiles: the fastest bf16 a CPU can have
        return ORDER_WITH_AMX
    return ORDER_WITH_AVX512_BF16 if has_bf16(flags) else ORDER_WITHOUT_BF16


def order(forced: str, flags: Iterable[str], *, gpu: bool = False) -> tuple[str, ...]:
    """The engines to try, in turn: a forced one first, then the machine's order; fp32 PyTorch always last.
    With `measure`, every engine, the CPU's order first: what its gate allowed is timed, not assumed."""
    if forced not in CHOICES:
        raise ValueError(f"an engine is one of {', '.join(CHOICES)}, not {forced!r}")
    if forced == MEASURE:
        rest = [engine for engine in ENGINES if engine not in preference(flags) and engine != TORCH_FP32]
        return (*[engine for engine in preference(flags) if engine != TORCH_FP32], *rest, TORCH_FP32)
    tried = ([] if forced == AUTO else [forced]) + [engine for engine in preference(flags, gpu=gpu)
                                                    if engine != forced]
    return tuple(tried) if TORCH_FP32 in tried else (*tried, TORCH_FP32)


def refusal(card: ModelCard, engine: str) -> str | None:
    """Why the card's registration does not allow `engine` (None: allowed). fp32 PyTorch needs no gate."""
    if engine == TORCH_FP32:
        return None
    record = card.fast_path
    if not record:
        return "no fast path was built for it (registered before the fast path, or with it off)"
    if record.get("error") and TABLE[engine].graph:
        return f"its fast artefact could not be built ({record['error']})"
    gate = record.get("gates", {}).get(engine)
    if gate is None and engine == record.get("serves"):
        gate = record.get("gate")  # a card written before every engine had its gate recorded
    if not gate:
        return "its registration did not gate it"
    if gate.get("pending"):  # a first model's other engines, until the training worker gates them
        return str(gate["reason"])
    if not gate.get("passed"):
        return f"its registration's same-answers gate refused it ({gate_text(gate)})"
    if TABLE[engine].graph and engine not in artefacts(card):
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


def choose(card: ModelCard, load: Loader, *, forced: str = AUTO, hardware: Hardware | None = None,
           clock: Callable[[], float] = time.perf_counter) -> Choice:
    """The first engine of `order(forced, flags, gpu)` that the card allows and that loads; each one passed
    over is logged with its reason. fp32 PyTorch, last, is allowed always: its failure to load is raised.
    `hardware`: the machine it serves on (None: this one).

    `forced` "measure": every allowed engine is loaded, and a `MeasuredChoice` over them serves (timed with
    `clock` at its first use); its `engine` is None until then."""
    hardware = this_machine() if hardware is None else hardware
    flags, gpu = hardware.cpu_flags, hardware.gpu
    if forced == MEASURE:
        return _choose_by_measuring(card, load, flags, clock)
    passed_over: dict[str, str] = {}
    for engine, classifier in _allowed(card, load, order(forced, flags, gpu=gpu), passed_over):
        level = logging.WARNING if forced not in (AUTO, engine) else logging.INFO
        log.log(level, "serving %s with %s (%s; CPU %s%s)", card.version, engine,
                describe(forced, engine, passed_over, gpu=gpu), cpu_summary(flags),
                "; on the GPU" if gpu and not TABLE[engine].graph else "")
        return Choice(engine, classifier, passed_over)
    raise AssertionError("unreachable: fp32 PyTorch is always tried")


def _allowed(card: ModelCard, load: Loader, candidates: Iterable[str], passed_over: dict[str, str], *,
             fp32_may_fail: bool = False) -> Iterator[tuple[str, Any]]:
    """(engine, loaded classifier) of each candidate the card allows and that loads here, in turn; each other
    one goes into `passed_over` with why, and is logged. fp32 PyTorch, always allowed, raises its failure
    (unless `fp32_may_fail`)."""
    for engine in candidates:
        why = refusal(card, engine)
        if why is None:
            try:
                classifier = load(engine)
            except Exception as error:  # noqa: BLE001 - a missing library, a corrupt file, ORT's own errors
                if engine == TORCH_FP32 and not fp32_may_fail:
                    raise
                why = f"it could not be loaded ({type(error).__name__}: {error})"
            else:
                yield engine, classifier
                continue
        passed_over[engine] = why
        log.warning("%s does not serve %s: %s", engine, card.version, why)


def _choose_by_measuring(card: ModelCard, load: Loader, flags: frozenset[str],
                         clock: Callable[[], float]) -> Choice:
    """Load every engine the card allows (a failure is passed over, fp32 PyTorch's too while another
    loads); more than one: a MeasuredChoice decides at first use, after RQ's fork (no inference here)."""
    passed_over: dict[str, str] = {}
    loaded = dict(_allowed(card, load, order(MEASURE, flags)[:-1], passed_over))
    # fp32 PyTorch, tried last: its failure is fatal only when nothing else loaded
    loaded.update(_allowed(card, load, [TORCH_FP32], passed_over, fp32_may_fail=bool(loaded)))
    if len(loaded) == 1:
        ((engine, classifier),) = loaded.items()
        log.info("serving %s with %s (the only engine allowed and loaded here: nothing to measure; CPU %s)",
                 card.version, engine, cpu_summary(flags))
        return Choice(engine, classifier, passed_over)
    log.info("loaded %s for %s: the fastest on %d fixed issues will serve, measured before the first job "
             "(CPU %s)", ", ".join(loaded), card.version, len(MEASURE_TEXTS), cpu_summary(flags))
    return Choice(MEASURE, MeasuredChoice(card.version, loaded, passed_over, clock=clock), passed_over)


class MeasuredChoice:
    """The engines a registration allowed, all loaded; at first use (the worker's warm-up, once RQ has
    forked its scheduler) each labels MEASURE_TEXTS one at a time, the fastest serves and the others are
    released. Until then `engine` is None; `when_served` callbacks learn the engine once it is known."""

    def __init__(self, version: str, candidates: Mapping[str, Any], passed_over: Mapping[str, str] | None = None,
                 *, clock: Callable[[], float] = time.perf_counter, texts: Sequence[str] = MEASURE_TEXTS,
                 rounds: int = MEASURE_ROUNDS):
        first = next(iter(candidates.values()))
        self.version, self.labels, self.card = version, list(first.labels), first.card
        self.engine: str | None = None
        self.milliseconds: dict[str, float] = {}  # engine → its best round's time per issue
        self.callbacks: list[Callable[[str], None]] = []
        self._candidates, self._passed_over = dict(candidates), dict(passed_over or {})
        self._clock, self._texts, self._rounds = clock, tuple(texts), rounds
        self._chosen: Any = None
        self._lock = threading.Lock()

    def chosen(self) -> Any:
        """The fastest engine's classifier, measured on the first call."""
        with self._lock:
            if self._chosen is None:
                self._measure()
            return self._chosen

    def _measure(self) -> None:
        failure: Exception | None = None
        for engine, classifier in self._candidates.items():
            try:
                self.milliseconds[engine] = self._time(classifier)
            except Exception as error:  # noqa: BLE001 - an engine that loaded yet cannot run here
                failure = error
                self._passed_over[engine] = f"it failed on the measurement's issues ({type(error).__name__}: {error})"
                log.warning("%s does not serve %s: %s", engine, self.version, self._passed_over[engine])
        if not self.milliseconds:
            raise failure or RuntimeError(f"no engine to measure for {self.version}")
        fastest = min(self.milliseconds.values())
        self.engine = next(engine for engine, ms in self.milliseconds.items()
                           if ms <= fastest * (1 + MEASURE_MARGIN))  # the CPU's order breaks near-ties
        self._chosen = self._candidates[self.engine]
        self._candidates = {}  # the others' sessions and weights go
        timings = ", ".join(f"{engine} {ms:.1f} ms" for engine, ms in self.milliseconds.items())
        passed = f"; passed over: {', '.join(self._passed_over)}" if self._passed_over else ""
        log.info("serving %s with %s (measured on %d fixed issues, one at a time, best of %d: %s an issue%s)",
                 self.version, self.engine, len(self._texts), self._rounds, timings, passed)
        for callback in self.callbacks:
            callback(self.engine)

    def _time(self, classifier: Any) -> float:
        """Milliseconds per issue of `classifier`'s best round, after one round that pays for lazy set-up."""
        best = float("inf")
        for round_ in range(self._rounds + 1):
            started = self._clock()
            for text in self._texts:
                classifier.predict([text])
            if round_:
                best = min(best, self._clock() - started)
        return round(best * 1000 / len(self._texts), 3)

    def predict(self, texts: Sequence[str], batch_size: int = 16) -> list[dict[str, float]]:
        return self.chosen().predict(texts, batch_size=batch_size)

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> list[list[float]]:
        return self.chosen().embed(texts, batch_size=batch_size)

    def predict_and_embed(self, texts: Sequence[str], batch_size: int = 16
                          ) -> tuple[list[dict[str, float]], list[list[float]]]:
        return self.chosen().predict_and_embed(texts, batch_size=batch_size)


def when_served(classifier: Any, callback: Callable[[str], None]) -> None:
    """Call `callback(engine)` with the engine serving `classifier` (a blend's: its encoder's): now, or,
    for a MeasuredChoice not measured yet, once it is. Nothing for a model without an encoder."""
    encoder = getattr(classifier, "encoder", classifier)
    if isinstance(encoder, MeasuredChoice) and encoder.engine is None:
        encoder.callbacks.append(callback)
        return
    engine = served_engine(classifier)
    if engine is not None:
        callback(engine)


def describe(forced: str, engine: str, passed_over: Mapping[str, str], *, gpu: bool = False) -> str:
    """Why `engine` serves, for the log line."""
    fastest = "PyTorch on the GPU" if gpu else "the CPU's fastest allowed"
    chosen = {AUTO: fastest, engine: "forced by ISSUE_SORTER_ENGINE"}.get(
        forced, f"ISSUE_SORTER_ENGINE asked for {forced}")
    if passed_over:
        chosen += "; passed over: " + ", ".join(passed_over)
    return chosen


def cpu_summary(flags: Iterable[str]) -> str:
    """The flags that decide the choice, as one word each."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    present = [flag for flag in wanted if flag in set(flags)]
    return " ".join(present) or "without AVX2"


def process_name(pid: int | None = None) -> str:
    """host:pid of this process (or of `pid` on this machine), as RQ names a worker's machine and process
    (bot.metrics matches live workers by it)."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}"


def record_engine(redis, scope: str, version: str, engine: str, process: str | None = None) -> None:
    """This worker serves `scope` with `version` on `engine` (GET /metrics reads it); Redis errors only log."""
    _quietly("record the serving engine", redis.hset, ENGINES_KEY, f"{process or process_name()}|{scope}",
             f"{version}|{engine}")


def record_warmed(redis, milliseconds: float, process: str | None = None) -> None:
    """This worker's models are loaded and warmed up: its first job pays for neither (`issue-sorter run`
    may wait for it before saying the service is up)."""
    _quietly("record the warm-up", redis.hset, WARMED_KEY, process or process_name(), f"{milliseconds:.0f}")


def forget_warmed(redis, process: str | None = None) -> None:
    """A worker starting: drop a warm-up recorded under its host:pid by an earlier process. Redis outlives
    the App, and a container restarted gives its processes the same pids: without this, `issue-sorter run`
    would take a new worker for warmed up before it has even loaded its model."""
    _quietly("clear an earlier warm-up record", redis.hdel, WARMED_KEY, process or process_name())


def _quietly(what: str, command: Callable[..., Any], *args: Any) -> None:
    """A Redis write that serving does without: its failure only logs."""
    try:
        command(*args)
    except RedisError as error:
        log.warning("could not %s in Redis: %s", what, error)


def served_engine(classifier: Any) -> str | None:
    """The engine of a loaded classifier (a blend's: its encoder's); None for a model without an encoder."""
    encoder = getattr(classifier, "encoder", classifier)
    engine = getattr(encoder, "engine", None)
    return engine if engine in ENGINES else None
