"""The fast serving path of a registered encoder: ONNX Runtime, fused graph, dynamic int8, and its gate.

Chosen by measurement on 2 CPU cores (../shared/STACK-NOTES.md §3, docs/BENCHMARKS.md "Serving"): the legacy
TorchScript exporter on a model loaded with eager attention is the only export that ORT's BERT optimizer fuses
fully (Attention, EmbedLayerNorm, SkipLayerNorm, BiasGelu); symbolic shape inference lets `quantize_dynamic`
type the fused weights. optimum-onnx would be the maintained wrapper, but it needs transformers < 4.58 and we
pin 5.x, so this uses torch.onnx and onnxruntime's own tools.

An engine may serve only when it gives the same answers as fp32 PyTorch on held-out issues (`same_answers`):
macro-F1 within 0.5 points and the top label the same on at least 99 % of them, both for the model's answers
and for the App's answers with the memory in the loop (`memory_answers`: each issue adjusted by the kNN vote
of the other issues of its repository, embedded by the same engine: an int8 or bf16 engine moves the
embeddings the vote reads). The answers compared are the App's: for a blend, the blend's, its TF-IDF member
beside the encoder either way (`_as_served`). Every engine is gated: int8 (the fastest on most CPUs), the
fused fp32 graph (PyTorch's answers to ~1e-6; no torch in the worker: quicker to load, less memory), and
bf16 autocast where the registering CPU has bf16 instructions (AMX or AVX-512 BF16; without them bf16 is
emulated, slower than fp32). Their figures: docs/BENCHMARKS.md, "Serving". Every artefact that passes is
kept; which of them serves is chosen where the worker runs (core.engines). `issue-sorter run`'s first model
gates only this CPU's engines, fastest first, until one passes: the service starts sooner, and the training
worker gates the others (`gate_pending`) for workers on other CPUs once it is up.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from core import engines
from core.card import BLEND_MEMBERS, ModelCard, update_card
from core.classifier import BlendedClassifier, load_classifier
from core.encoder import SERVES, SERVES_FP32, TransformerClassifier, graph_classifier
from core.engines import FAST_DIR, FAST_FILE, FP32_FILE, STATIC_INT8_FILE, TABLE
from core.file_hash import file_sha256
from core.memory import MEMORY_SIZE, Memory
from trainer.dataset import Example, load_file
from trainer.evaluate import macro_f1, top_label
from trainer.registry import Model
from trainer.sources import NLBSE_TEST_FILE, shared_dir
from trainer.static_int8 import calibration_sample, quantize_static_int8

log = logging.getLogger(__name__)

MAX_F1_DROP = 0.005  # macro-F1 the fast path may lose against PyTorch on the gate's issues (0.5 points)
MIN_AGREEMENT = 0.99  # share of the gate's issues whose top label must be PyTorch's
OPSET = 17  # ONNX opset of the export; LayerNormalization is native from 17
PENDING = "not gated yet: the training worker gates it once the service is up (trainer.jobs.gate_pending_engines)"


@dataclass(frozen=True)
class FastPathOptions:
    """Whether registering a trained model builds its fast serving path, and on which issues it is gated."""

    build: bool = True  # False: no export, PyTorch serves it (tests that are not about the fast path)
    gate_issues: Sequence[Example] | None = None  # None: NLBSE'24's test split, else the held-out issues
    # True: also static int8 (OpenVINO's), calibrated on the training issues: minutes more per registration
    # on 2 cores, for an engine measured slower than OpenVINO's bf16 on AMX and refused by its gate there
    static_int8: bool = False
    cpu_flags: frozenset[str] | None = None  # the registering CPU's, which decide what is gated (None: this one's)
    # False: gate only what this CPU tries in turn (core.engines.preference) until one passes, the engine that
    # serves here, and leave the others pending for `gate_pending` (the training queue's job once the service
    # is up): `issue-sorter run`'s first model serves sooner. Only where the gate's issues can be found again
    # (NLBSE'24's test split); otherwise every engine is gated at once.
    all_engines: bool = True

    def issues(self, held_out: Sequence[Example]) -> tuple[Sequence[Example], str]:
        """(the gate's issues, where they come from) for a registration that held out `held_out`."""
        if self.gate_issues is not None:
            return self.gate_issues, "given by the caller"
        issues, source = default_gate_issues()
        if issues:
            return issues, source
        return held_out, f"the {len(held_out)} held-out issues of the registration"

    def gates_all_now(self) -> bool:
        """Whether the registration gates every engine: unless `all_engines` is off and the gate's issues are
        NLBSE'24's test split, which `gate_pending` finds again for the rest."""
        return self.all_engines or self.gate_issues is not None or not default_gate_issues()[0]


@lru_cache(maxsize=1)
def default_gate_issues(data_dir: Path | None = None) -> tuple[tuple[Example, ...], str]:
    """NLBSE'24's test split (1,500 issues of 5 repositories, never trained on) when ../shared is there."""
    path = (data_dir or shared_dir() / "data") / NLBSE_TEST_FILE
    if not path.is_file():
        log.info("fast path: no NLBSE'24 test split at %s: the gate uses the registration's held-out issues", path)
        return (), ""
    return tuple(load_file(path)), f"NLBSE'24 test split ({NLBSE_TEST_FILE})"


def build_fast_path(model: Model, issues: Sequence[Example], *,
                    source: str = "", cpu_flags: frozenset[str] | None = None,
                    calibration: Sequence[str] = (), reference: Answers | None = None,
                    all_engines: bool = True) -> ModelCard:
    """Export the encoder of the registered `model` (as it came from its registration), gate each artefact
    on `issues`, record the outcome in its card; returns the card as recorded (`fast_path`). `calibration`:
    texts of the issues it was trained on, which static int8 calibrates its activations on (none: no static
    int8). `reference`: fp32 PyTorch's answers on `issues` as served, where the registration already has them
    (None: computed here). `all_engines` False: only this CPU's engines in turn until one passes; the others
    are recorded as pending (`PENDING`) and their graphs kept for `gate_pending`.

    Never raises for a model that cannot be exported: registration goes on and PyTorch serves, with the
    reason in the card (`fast_path.error`) and in the log.
    """
    model_directory, directory, card = model.directory, model.encoder_directory, model.card
    shutil.rmtree(directory / FAST_DIR, ignore_errors=True)  # a pulled model's own graphs never mix in
    if not issues:  # nothing to check it on: not worth the export
        log.warning("fast path: no held-out issues to gate %s on; PyTorch serves it", directory)
        gate = {"passed": False, "reason": "no held-out issues"}
        record = {"serves": "pytorch", "gate": gate,
                  "gates": {engine: gate for engine in engines.ENGINES if engine != engines.TORCH_FP32}}
        return _record(model_directory, directory, record)
    flags = engines.this_machine().cpu_flags if cpu_flags is None else cpu_flags
    try:
        record = _export_and_gate(directory, issues, source, model_directory, card, flags, calibration,
                                  reference, all_engines)
    except Exception as error:  # noqa: BLE001 - any exporter, optimizer or ORT failure: serve PyTorch, keep the model
        log.warning("fast path: could not build %s (%s: %s); PyTorch serves it", directory, type(error).__name__,
                    error)
        shutil.rmtree(directory / FAST_DIR, ignore_errors=True)
        record = {"serves": "pytorch", "gates": {}, "error": f"{type(error).__name__}: {str(error)[:300]}"}
    log.info("fast path of %s: gates %s; %s serves where a worker cannot choose", card.version, record["gates"],
             record["serves"])
    return _record(model_directory, directory, record)


def _as_served(model_directory: Path, card: ModelCard) -> tuple[Callable[[Any], Any], str]:
    """What turns an encoder into the classifier the App serves from `model_directory`, and its name.

    A blend's answers are the blend's: an int8 rounding that flips the encoder's top label on a near-tie
    changes the App's answer only when the TF-IDF member leaves it a near-tie too (bootstrap model,
    NLBSE'24 test: 97.3 % of the encoder's top labels kept, 99.3 % of the blend's)."""
    if card.kind != "blend":
        return (lambda encoder: encoder), "the encoder's"
    tfidf = _ScoredOnce(load_classifier(model_directory / BLEND_MEMBERS[1]))
    share = card.tfidf_share
    answers = f"the blend's (TF-IDF share {share:g})"
    return (lambda encoder: BlendedClassifier(encoder, tfidf, share, card=card)), answers


class _ScoredOnce:
    """A blend's TF-IDF member as the gate runs it: every engine's blend scores the same issues beside the
    same TF-IDF member, so its scores are computed once."""

    def __init__(self, tfidf):
        self.tfidf, self.labels, self.version, self.card = tfidf, tfidf.labels, tfidf.version, tfidf.card
        self.scored: dict[tuple[str, ...], list[dict[str, float]]] = {}

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        key = tuple(texts)
        if key not in self.scored:
            self.scored[key] = self.tfidf.predict(texts)
        return self.scored[key]


def _export_and_gate(directory: Path, issues: Sequence[Example], source: str, model_directory: Path,
                     card: ModelCard, cpu_flags: frozenset[str], calibration: Sequence[str],
                     reference: Answers | None, all_engines: bool) -> dict[str, Any]:
    """Every engine (or this CPU's, in turn, until one passes) gated against fp32 PyTorch; the artefacts of
    those that pass are kept (`_settle`)."""
    started = time.perf_counter()
    encoder_card = card if directory == model_directory else ModelCard.read(directory)
    graphs = export_onnx(directory, calibration=calibration, max_length=encoder_card.max_length)
    record: dict[str, Any] = {"serves": "pytorch", "gates": {}, "artefacts": {},
                              "export_seconds": round(time.perf_counter() - started, 1)}
    as_served, answers = _as_served(model_directory, card)
    pytorch = TransformerClassifier.from_directory(directory, encoder_card, device="cpu")
    gated, not_gated = _engines_to_gate(graphs, cpu_flags)
    load = _loader(directory, graphs, encoder_card, pytorch)
    reference = reference or served_answers(as_served(pytorch), issues)
    extra = {"issues_source": source, "answers": answers}
    if all_engines:
        gates = gate_engines(reference, ((engine, load(engine)) for engine in gated), issues, as_served, extra)
    else:
        gates = _gate_until_one_passes(reference, gated, engines.preference(cpu_flags), load, issues, as_served,
                                       extra)
    record["gates"] = gates | not_gated
    return _settle(record, directory, graphs)


def gate_pending(model: Model, issues: Sequence[Example], *, source: str = "",
                 cpu_flags: frozenset[str] | None = None) -> ModelCard:
    """Gate the engines that `model`'s registration left pending (`FastPathOptions.all_engines` off) on
    `issues`, as its registration would have; their verdicts join the card, the graphs of those refused go.
    Returns the card as recorded; a card with nothing pending is returned as it is."""
    record, pending = model.card.fast_path, pending_engines(model.card)
    if not pending:
        return model.card
    directory = model.encoder_directory
    encoder_card = model.card if directory == model.directory else ModelCard.read(directory)
    graphs = {name: directory / FAST_DIR / engine.graph for name, engine in TABLE.items()
              if engine.graph and (directory / FAST_DIR / engine.graph).is_file()}
    flags = engines.this_machine().cpu_flags if cpu_flags is None else cpu_flags
    as_served, answers = _as_served(model.directory, model.card)
    pytorch = TransformerClassifier.from_directory(directory, encoder_card, device="cpu")
    gated, not_gated = _engines_to_gate(graphs, flags)
    load = _loader(directory, graphs, encoder_card, pytorch)
    started = time.perf_counter()
    reference = served_answers(as_served(pytorch), issues)
    gates = gate_engines(reference, ((engine, load(engine)) for engine in gated if engine in pending), issues,
                         as_served, {"issues_source": source, "answers": answers})
    gates |= {engine: why for engine, why in not_gated.items() if engine in pending}
    record = _settle(record | {"gates": record["gates"] | gates}, directory, graphs)
    record["pending_seconds"] = round(time.perf_counter() - started, 1)
    log.info("fast path of %s: pending gates run (%s); %s serves where a worker cannot choose",
             model.version, {engine: gates[engine]["passed"] for engine in pending}, record["serves"])
    return _record(model.directory, directory, record)


def pending_engines(card: ModelCard) -> list[str]:
    """The engines whose gate `card`'s registration left for the training worker (`gate_pending`)."""
    return [engine for engine, gate in card.fast_path.get("gates", {}).items() if gate.get("pending")]


def _gate_until_one_passes(reference: Answers, gated: Sequence[str], order: Sequence[str],
                           load: Callable[[str], Any], issues: Sequence[Example], as_served: Callable[[Any], Any],
                           extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Gate the engines of this CPU's `order` in turn until one passes (the one its workers will serve);
    every other engine of `gated` is pending."""
    gates: dict[str, dict[str, Any]] = {}
    for engine in [engine for engine in order if engine in gated]:
        gates |= gate_engines(reference, [(engine, load(engine))], issues, as_served, extra)
        if gates[engine]["passed"]:
            break
    return gates | {engine: {"passed": False, "pending": True, "reason": PENDING}
                    for engine in gated if engine not in gates}


def _settle(record: dict[str, Any], directory: Path, graphs: dict[str, Path]) -> dict[str, Any]:
    """`record` with the artefacts of the engines whose gate passed (file and SHA-256) and the ONNX Runtime
    one a worker that cannot choose serves (int8 before fp32); graphs no engine passed or awaits are deleted."""
    record = record | {"serves": "pytorch", "artefacts": {}}
    record.pop("gate", None)
    for engine, artefact in graphs.items():
        if not record["gates"][engine]["passed"]:
            continue
        kept = {"file": f"{FAST_DIR}/{artefact.name}", "sha256": file_sha256(artefact)}
        record["artefacts"][engine] = kept
        if record["serves"] == "pytorch" and engine in (SERVES, SERVES_FP32):
            record |= {"serves": engine, "gate": record["gates"][engine]} | kept
    needed = {directory / kept["file"] for kept in record["artefacts"].values()}
    needed |= {artefact for engine, artefact in graphs.items() if record["gates"][engine].get("pending")}
    for artefact in set(graphs.values()) - needed:
        artefact.unlink()
    return record


def gate_engines(reference: Answers, candidates: Iterable[tuple[str, Any]], issues: Sequence[Example],
                 as_served: Callable[[Any], Any] = lambda encoder: encoder, extra: dict | None = None
                 ) -> dict[str, dict[str, Any]]:
    """Each candidate engine's gate (`same_answers` against fp32 PyTorch's `reference` answers on `issues`),
    by engine; `as_served` wraps an encoder as the App serves it (a blend's TF-IDF beside it)."""
    return {engine: same_answers(reference, served_answers(as_served(fast), issues), issues, fast.labels)
            | (extra or {}) for engine, fast in candidates}


def _engines_to_gate(graphs: dict[str, Path], cpu_flags: frozenset[str]
                     ) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(the engines to gate, why each other engine is not gated). bf16 only where the CPU has bf16
    instructions (emulated without them: slower than fp32); OpenVINO where it is installed; a graph engine
    where its graph was exported."""
    openvino = importlib.util.find_spec("openvino") is not None
    why = {}
    for name, engine in TABLE.items():
        if engine.openvino and not openvino:
            why[name] = "not gated: OpenVINO is not installed where it was registered"
        elif engine.bf16 and not engines.has_bf16(cpu_flags):
            why[name] = "not gated: no bf16 instructions where it was registered"
        elif engine.graph and name not in graphs:
            why[name] = (f"not gated: no {engine.graph} (no training issues to calibrate it on, or its "
                         "quantisation failed: the registration's log says which)")
    gated = [engine for engine in engines.ENGINES if engine not in why and engine != engines.TORCH_FP32]
    return gated, {engine: {"passed": False, "reason": reason} for engine, reason in why.items()}


def _loader(directory: Path, graphs: dict[str, Path], card: ModelCard, pytorch: TransformerClassifier
            ) -> Callable[[str], Any]:
    """Loads an engine when its turn to be gated comes: one beside PyTorch in memory at a time."""
    def load(engine: str):
        if engine in graphs:
            return graph_classifier(directory, graphs[engine], card, engine)
        return TransformerClassifier(pytorch.model, pytorch.tokenizer, card, bf16=True)

    return load


def _record(model_directory: Path, encoder: Path, record: dict[str, Any]) -> ModelCard:
    """Into the encoder's card (what serving reads) and, for a blend, its own card too (what people read);
    the model's card as recorded."""
    card = update_card(encoder, fast_path=record)
    if model_directory.resolve() != encoder.resolve():
        card = update_card(model_directory, fast_path=record)
    return card


def export_onnx(directory: Path, *, calibration: Sequence[str] = (), max_length: int = 128) -> dict[str, Path]:
    """The graph each engine runs (core.engines.TABLE), by engine, under fast/ beside the encoder's weights:
    the fused graph in int8 and fp32; with `calibration` issues, static int8 too (trainer.static_int8).

    fp32 export → fused (ORT's BERT optimizer) → symbolic shapes → dynamic int8 per channel with 7-bit
    weights: on AVX2 without VNNI, ORT's u8s8 kernels can saturate with full-range weights (ORT's
    quantization docs), and 7-bit weights move a fine-tuned MiniLM's probabilities less (docs/BENCHMARKS.md,
    "Serving").
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    from onnxruntime.transformers.optimizer import optimize_model

    fast = directory / FAST_DIR
    fast.mkdir(exist_ok=True)
    exported, fused, int8 = fast / "exported.onnx", fast / FP32_FILE, fast / FAST_FILE
    config = export_fp32(directory, exported)
    if calibration:  # from the unfused graph: plain ONNX operators, which OpenVINO reads as int8 patterns
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(directory)
        try:
            quantize_static_int8(exported, fast / STATIC_INT8_FILE, tokenizer, calibration_sample(calibration),
                                 max_length)
        except Exception as error:  # noqa: BLE001 - ORT's quantiser on a graph it cannot type: the rest still serve
            log.warning("fast path: no static int8 for %s (%s: %s)", directory, type(error).__name__, error)
            (fast / STATIC_INT8_FILE).unlink(missing_ok=True)
    optimized = optimize_model(str(exported), model_type="bert", num_heads=config.num_attention_heads,
                               hidden_size=config.hidden_size)
    onnx.save(SymbolicShapeInference.infer_shapes(optimized.model, auto_merge=True), str(fused))
    exported.unlink()
    logging.disable(logging.WARNING)  # quantize_dynamic logs a line per tensor (and advice) on the root logger
    try:
        quantize_dynamic(fused, int8, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    finally:
        logging.disable(logging.NOTSET)
    return {name: fast / engine.graph for name, engine in TABLE.items()
            if engine.graph and (fast / engine.graph).is_file()}


def export_fp32(directory: Path, target: Path):
    """The fine-tuned model as ONNX with two outputs: logits and the last hidden state (for embeddings).

    Inputs are named as the tokenizer names its outputs; serving feeds them by name, never by position.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    # eager attention: SDPA exports as a pattern ORT's optimizer does not fuse into Attention
    model = AutoModelForSequenceClassification.from_pretrained(directory, attn_implementation="eager",
                                                               use_safetensors=True).eval()
    sample = tokenizer(["a short issue", "a somewhat longer issue about a crash"], padding=True,
                       return_tensors="pt")
    names = list(sample.keys())
    dynamic = {name: {0: "batch", 1: "sequence"} for name in names}
    dynamic |= {"logits": {0: "batch"}, "last_hidden_state": {0: "batch", 1: "sequence"}}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's DeprecationWarning and tracer warnings
        torch.onnx.export(_logits_and_hidden(model, names), tuple(sample[name] for name in names), str(target),
                          input_names=names, output_names=["logits", "last_hidden_state"],
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False)
    return model.config


def _logits_and_hidden(model, names: list[str]):
    """A torch module returning (logits, last hidden state) from positional inputs named `names`."""
    import torch

    class LogitsAndHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            output = self.model(**dict(zip(names, inputs, strict=True)), output_hidden_states=True)
            return output.logits, output.hidden_states[-1]

    return LogitsAndHidden()


@dataclass(frozen=True)
class Answers:
    """An engine's top labels on the gate's issues: the model's own, and the App's with the memory."""

    model: list[str]
    with_memory: list[str]


def served_answers(classifier, issues: Sequence[Example]) -> Answers:
    """`classifier`'s answers on `issues`, without and with the memory in the loop (`memory_answers`)."""
    return answers_from(*classifier.predict_and_embed([issue.text for issue in issues]), issues)


def answers_from(scores: Sequence[dict[str, float]], vectors: Sequence[Sequence[float]],
                 issues: Sequence[Example]) -> Answers:
    """The answers that `scores` and `vectors`, one per issue of `issues`, give."""
    return Answers([top_label(row) for row in scores], memory_answers(scores, vectors, issues))


def memory_answers(scores: Sequence[dict[str, float]], vectors: Sequence[Sequence[float]],
                   issues: Sequence[Example]) -> list[str]:
    """Each issue's top label once its scores are adjusted by the memory of the other issues of its
    repository (their true labels, the engine's own embeddings and top labels: what core.memory holds
    once they are confirmed), as the App serves an issue of a repository whose history is confirmed."""
    matrix = np.asarray(vectors, dtype=np.float32)
    by_repo: dict[str | None, list[int]] = {}
    for i, issue in enumerate(issues):
        by_repo.setdefault(issue.repo, []).append(i)
    answers = [""] * len(issues)
    for rows in by_repo.values():
        for i in rows:
            others = [j for j in rows if j != i][-MEMORY_SIZE:]
            memory = Memory(matrix[others], [issues[j].label for j in others],
                            model_labels=[top_label(scores[j]) for j in others])
            answers[i] = top_label(memory.adjust(scores[i], matrix[i]) if others else scores[i])
    return answers


def same_answers(reference: Answers, fast: Answers, issues: Sequence[Example], labels: Sequence[str]
                 ) -> dict[str, Any]:
    """An engine's answers against fp32 PyTorch's (`reference`) on `issues`: figures and the word, for the
    model alone and with the memory in the loop; both must hold."""
    truth = [issue.label for issue in issues]
    f1_torch, f1_fast = macro_f1(truth, reference.model, labels), macro_f1(truth, fast.model, labels)
    f1_torch_memory = macro_f1(truth, reference.with_memory, labels)
    f1_fast_memory = macro_f1(truth, fast.with_memory, labels)
    agreement = _agreement(reference.model, fast.model)
    memory_agreement = _agreement(reference.with_memory, fast.with_memory)
    passed = (is_same_answers(f1_torch, f1_fast, agreement)
              and is_same_answers(f1_torch_memory, f1_fast_memory, memory_agreement))
    return {"passed": passed, "issues": len(issues),
            "macro_f1_pytorch": round(f1_torch, 4), "macro_f1_fast": round(f1_fast, 4),
            "top_label_agreement": round(agreement, 4),
            "macro_f1_pytorch_memory": round(f1_torch_memory, 4), "macro_f1_fast_memory": round(f1_fast_memory, 4),
            "memory_agreement": round(memory_agreement, 4),
            "rule": f"macro-F1 within {MAX_F1_DROP * 100:g} points, top label agreeing on >= {MIN_AGREEMENT:.0%}, "
                    "without and with the memory"}


def _agreement(reference: Sequence[str], fast: Sequence[str]) -> float:
    return sum(a == b for a, b in zip(reference, fast, strict=True)) / len(reference)


def is_same_answers(f1_pytorch: float, f1_fast: float, agreement: float) -> bool:
    """The gate's rule: no more than 0.5 points of macro-F1 lost, the top label agreeing on >= 99 %."""
    return agreement >= MIN_AGREEMENT and f1_fast >= f1_pytorch - MAX_F1_DROP
