"""The fast serving path: built when a trained model is registered, gated on real issues, served only when
intact."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.labeling.serving import Served, ServingModels
from core import engines
from core.card import ModelCard, read_card
from core.classifier import BlendedClassifier, load_classifier
from core.db import Base, make_sessionmaker, session_scope
from core.encoder import SERVES, SERVES_FP32, OnnxClassifier, OpenVinoClassifier, TransformerClassifier
from core.queues import CRASH_RETRY, GATE_PENDING, TRAINING_QUEUE, make_queue
from core.settings import Settings
from tests.conftest import ONNX_FIRST, ONNX_FIRST_CPU
from tests.fakes import FakeEncoder
from tests.trainer.conftest import balanced
from trainer import context, jobs
from trainer.blend import TrainedBlend
from trainer.config import TrainConfig
from trainer.context import TrainingContext
from trainer.evaluate import evaluate_classifier, macro_f1
from trainer.fast_path import (
    MIN_AGREEMENT,
    PENDING,
    Answers,
    FastPathOptions,
    build_fast_path,
    gate_engines,
    gate_pending,
    is_same_answers,
    served_answers,
)
from trainer.pipeline import add_to_registry, score_held_out
from trainer.registry import Registry
from trainer.train import fine_tune

FAST_ENGINES = (SERVES, SERVES_FP32)


@pytest.fixture(scope="session")
def decisive_minilm(nlbse_train):
    """MiniLM fine-tuned until it is sure of most issues (150 real ones, 4 epochs, 64 tokens; ~40 steps).

    A barely trained model scores every class near 1/3: int8's rounding then flips top labels and the
    gate rightly refuses it, which is not what these tests are about."""
    config = TrainConfig(max_length=64, epochs=4, batch_size=16, lr=2e-4)
    return fine_tune(config, balanced(nlbse_train, 10), progress=False)


@pytest.fixture
def gate_issues(small_heldout):
    """45 real held-out issues (3 per repository and label of NLBSE'24's test split)."""
    return small_heldout


@pytest.fixture
def register(registry, gate_issues):
    """Registering a trained model as trainer.pipeline does: stored, then its fast path built and gated."""
    def register(trained, **options):
        return add_to_registry(registry, trained, fast_path=FastPathOptions(**{"gate_issues": gate_issues} | options))

    return register


@pytest.fixture(scope="module")
def registered_once(tmp_path_factory, decisive_minilm, small_heldout) -> Path:
    """The decisive model registered once (export and gate: seconds); tests that damage it copy it."""
    root = tmp_path_factory.mktemp("fast-registry")
    url = f"sqlite:///{root / 'registry.db'}"
    factory = make_sessionmaker(url)
    Base.metadata.create_all(factory.kw["bind"])
    with session_scope(factory) as session:
        model = add_to_registry(Registry(root / "models", session), decisive_minilm,
                                fast_path=FastPathOptions(gate_issues=small_heldout))
        assert model.card == ModelCard.read(model.directory)  # the card it comes back with is the one recorded
        return model.directory


@pytest.fixture
def registered(registered_once, tmp_path) -> Path:
    """A copy of it this test may damage."""
    return Path(shutil.copytree(registered_once, tmp_path / registered_once.name))


def pytorch(directory) -> TransformerClassifier:
    """The encoder in `directory` run by PyTorch: the answers its fast path must give."""
    return TransformerClassifier.from_directory(directory, ModelCard.read(directory), device="cpu")


def top_labels(classifier, issues) -> list[str]:
    return [max(row, key=row.get) for row in classifier.predict([issue.text for issue in issues])]


def test_a_registered_encoder_serves_through_its_fast_artefact_with_pytorchs_top_labels(registered, gate_issues,
                                                                                       caplog):
    record = read_card(registered)["fast_path"]
    assert record["serves"] in FAST_ENGINES and record["gate"]["passed"]
    gate = record["gate"]
    assert gate["issues"] == len(gate_issues) and gate["top_label_agreement"] >= 0.99
    assert gate["macro_f1_fast"] >= gate["macro_f1_pytorch"] - 0.005
    assert hashlib.sha256((registered / record["file"]).read_bytes()).hexdigest() == record["sha256"]
    kept = record["artefacts"]
    assert record["serves"] in kept and all(record["gates"][engine]["passed"] for engine in kept)
    assert sorted(p.name for p in (registered / "fast").iterdir()) == sorted({Path(a["file"]).name
                                                                              for a in kept.values()})  # passed
    assert set(FAST_ENGINES) <= set(record["gates"])  # both gated, whatever int8 gave
    assert record["gate"]["issues_source"] == "given by the caller"
    with caplog.at_level(logging.INFO, logger="core.engines"):
        fast = load_classifier(registered, hardware=ONNX_FIRST)
    # a CPU without bf16: the first ONNX engine its gate allowed, int8 before fp32
    assert isinstance(fast, OnnxClassifier) and fast.engine == next(e for e in FAST_ENGINES if e in kept)
    assert f"serving {fast.version} with {fast.engine}" in caplog.text
    torch_path = pytorch(registered)
    assert top_labels(fast, gate_issues) == top_labels(torch_path, gate_issues)


def test_the_fast_path_gives_the_memory_the_same_embeddings(registered, gate_issues):
    texts = [issue.text for issue in gate_issues[:8]]
    fast, torch_path = load_classifier(registered), pytorch(registered)
    scores, vectors = fast.predict_and_embed(texts)
    assert vectors == fast.embed(texts) and len(scores) == len(texts)
    for ours, theirs in zip(vectors, torch_path.embed(texts), strict=True):
        assert abs(sum(a * a for a in ours) - 1) < 1e-4  # normalised, as core.memory expects
        assert sum(a * b for a, b in zip(ours, theirs, strict=True)) > 0.97  # cosine to PyTorch's vector


def damage(artefact: Path, how: str) -> None:
    if how == "missing":
        artefact.unlink()
    else:
        data = bytearray(artefact.read_bytes())
        data[len(data) // 2] ^= 0xFF
        artefact.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["missing", "corrupt"])
def test_missing_or_corrupt_artefacts_fall_back_to_pytorch_and_say_why(registered, gate_issues, how, caplog):
    kept = read_card(registered)["fast_path"]["artefacts"]
    fast_labels = top_labels(load_classifier(registered, hardware=ONNX_FIRST), gate_issues)
    for file in {artefact["file"] for artefact in kept.values()}:  # engines may share a graph: each file once
        damage(registered / file, how)
    # without bf16 instructions the fallback is fp32 PyTorch, whose answers the fast path's are compared with
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        served = load_classifier(registered, hardware=ONNX_FIRST)
    assert isinstance(served, TransformerClassifier) and served.engine == "pytorch"
    lines = [r.getMessage() for r in caplog.records if "could not be loaded" in r.getMessage()]
    # every kept engine this CPU would try says why it does not serve (a bf16 engine is not tried without bf16)
    assert {line.split()[0] for line in lines} == {engine for engine in kept if "bf16" not in engine}
    assert all(("is missing" if how == "missing" else "does not match the SHA-256") in line for line in lines)
    assert top_labels(served, gate_issues) == fast_labels


def test_a_corrupt_int8_artefact_falls_back_to_the_fp32_graph_when_its_gate_passed_too(
        register, decisive_minilm, monkeypatch, caplog):
    monkeypatch.setattr("trainer.fast_path.is_same_answers", lambda *figures: True)  # both engines pass
    model = register(decisive_minilm, cpu_flags=ONNX_FIRST_CPU)
    kept = read_card(model.directory)["fast_path"]["artefacts"]
    assert set(kept) == set(FAST_ENGINES)  # every engine that passed is kept: the worker's CPU chooses
    damage(model.directory / kept[SERVES]["file"], "corrupt")
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        served = load_classifier(model.directory, hardware=ONNX_FIRST)
    assert isinstance(served, OnnxClassifier) and served.engine == SERVES_FP32
    assert "onnxruntime-int8 does not serve" in caplog.text and "does not match the SHA-256" in caplog.text


def test_a_model_that_cannot_be_exported_still_registers_and_pytorch_serves_it(
        register, decisive_minilm, monkeypatch, caplog):
    def broken_export(directory, **options):
        raise RuntimeError("Exporting the operator 'aten::something' is not supported")

    monkeypatch.setattr("trainer.fast_path.export_onnx", broken_export)
    with caplog.at_level(logging.WARNING):
        model = register(decisive_minilm)
    record = read_card(model.directory)["fast_path"]
    assert record["serves"] == "pytorch" and "aten::something" in record["error"]
    assert "could not build" in caplog.text
    assert isinstance(load_classifier(model.directory), TransformerClassifier)
    assert "could not be built" in caplog.text


def test_a_gate_without_held_out_issues_serves_pytorch(register, decisive_minilm, caplog):
    model = register(decisive_minilm, gate_issues=[])
    assert read_card(model.directory)["fast_path"]["serves"] == "pytorch"
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        assert isinstance(load_classifier(model.directory), TransformerClassifier)
    assert "its registration's same-answers gate refused it (no held-out issues)" in caplog.text


@pytest.mark.parametrize(("f1_pytorch", "f1_fast", "agreement", "passes"), [
    (0.80, 0.80, 1.0, True), (0.80, 0.7951, 0.995, True), (0.80, 0.7949, 1.0, False), (0.80, 0.85, 0.989, False),
])
def test_the_gate_allows_half_a_point_of_macro_f1_and_one_percent_of_top_labels(f1_pytorch, f1_fast, agreement,
                                                                               passes):
    assert is_same_answers(f1_pytorch, f1_fast, agreement) is passes


def test_a_promoted_blend_serves_its_encoder_through_the_fast_path_in_the_bot(
        register, registry, decisive_minilm, tfidf_model, gate_issues):
    blend = TrainedBlend(decisive_minilm, tfidf_model, 0.7)
    model = register(blend, cpu_flags=ONNX_FIRST_CPU)
    registry.promote(model.version)
    assert read_card(model.directory)["fast_path"]["serves"] in FAST_ENGINES  # what an operator reads
    models = ServingModels(lambda repo: Served("global", model.version, model.row.path),
                           functools.partial(load_classifier, hardware=ONNX_FIRST))
    served = models.for_repository("octo/repo")
    assert isinstance(served, BlendedClassifier) and isinstance(served.encoder, OnnxClassifier)
    reference = load_classifier(model.directory, hardware=ONNX_FIRST)
    reference.encoder = pytorch(model.directory / "encoder")
    # what the gate promises: PyTorch's top label on at least MIN_AGREEMENT of its issues (int8's dynamic
    # activation scales depend on the batch, so one borderline issue of 45 may differ from the gate's run)
    same = sum(a == b for a, b in zip(top_labels(served, gate_issues), top_labels(reference, gate_issues)))
    assert same / len(gate_issues) >= MIN_AGREEMENT - 1 / len(gate_issues)


def test_a_blends_fast_path_is_gated_on_the_blends_answers(register, decisive_minilm, tfidf_model, gate_issues):
    """The App answers with the blend, so the gate compares blends: the TF-IDF member beside the fast
    encoder against it beside PyTorch's."""
    model = register(TrainedBlend(decisive_minilm, tfidf_model, 0.7))
    record = read_card(model.directory)["fast_path"]
    gate = record["gates"][record["serves"]]
    assert gate["answers"] == "the blend's (TF-IDF share 0.7)"
    reference = load_classifier(model.directory)
    reference.encoder = pytorch(model.directory / "encoder")
    truth = [issue.label for issue in gate_issues]
    pytorch_f1 = macro_f1(truth, top_labels(reference, gate_issues), reference.labels)
    assert gate["macro_f1_pytorch"] == round(pytorch_f1, 4)
    served = top_labels(load_classifier(model.directory), gate_issues)
    agreement = sum(a == b for a, b in zip(served, top_labels(reference, gate_issues))) / len(gate_issues)
    # the recorded figure, reproduced to one issue (int8's activation scales depend on the batch)
    assert abs(gate["top_label_agreement"] - agreement) <= 1 / len(gate_issues) + 1e-4


def test_held_out_issues_that_are_the_gates_are_scored_once_and_gate_as_if_scored_again(
        register, registry, decisive_minilm, tfidf_model, gate_issues, small_heldout):
    """The bootstrap holds out NLBSE'24's test split, which the gate runs on too: its evaluation's pass is
    the gate's fp32 PyTorch reference, and the card records the same gates and metrics as two passes."""
    blend = TrainedBlend(decisive_minilm, tfidf_model, 0.5)
    options = FastPathOptions(gate_issues=gate_issues)
    metrics, reference = score_held_out(blend.classifier(), gate_issues, options)
    scored_twice = evaluate_classifier(blend.classifier(), gate_issues)
    assert reference is not None
    assert {name: metrics[name] for name in ("macro_f1", "per_repo", "thresholds")} == {
        name: scored_twice[name] for name in ("macro_f1", "per_repo", "thresholds")}
    once = add_to_registry(registry, blend, fast_path=options, reference=reference).card.fast_path["gates"]
    again = register(blend).card.fast_path["gates"]
    assert once.keys() == again.keys()
    for engine, gate in again.items():
        assert {name: once[engine].get(name) for name in ("passed", "macro_f1_pytorch", "macro_f1_pytorch_memory")} \
            == {name: gate.get(name) for name in ("passed", "macro_f1_pytorch", "macro_f1_pytorch_memory")}, engine
    everything_a_bug = Answers(["bug"] * len(gate_issues), ["bug"] * len(gate_issues))  # not scored again:
    gates = add_to_registry(registry, blend, fast_path=options, reference=everything_a_bug).card.fast_path["gates"]
    truth = [issue.label for issue in gate_issues]
    assert gates[SERVES_FP32]["macro_f1_pytorch"] == round(macro_f1(truth, everything_a_bug.model, blend.labels), 4)
    other_issues = small_heldout[:-1]  # held-out issues that are not the gate's: scored for the card only
    assert score_held_out(blend.classifier(), other_issues, options)[1] is None


@pytest.mark.e2e  # a Python process of its own: what it imports
def test_a_worker_serving_the_fast_path_never_imports_torch(registered_once):
    """What makes the fast path start in a fraction of PyTorch's time and hold a fraction of its memory."""
    script = f"""
import sys
from core.classifier import load_classifier
from core.engines import Hardware
onnx_first = Hardware(frozenset({sorted(ONNX_FIRST_CPU)!r}))  # bf16 (AMX, Zen 4) would come first
classifier = load_classifier({str(registered_once)!r}, threads=1, hardware=onnx_first)
scores, vectors = classifier.predict_and_embed(["Crash on start", "Add a dark mode"])
print(type(classifier).__name__, len(vectors[0]), sorted(m for m in sys.modules if m.split(".")[0] == "torch"))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[-2] == "OnnxClassifier 384 []"


def test_with_nlbse_beside_the_checkout_its_test_split_gates_every_registration(nlbse_test, small_heldout):
    issues, source = FastPathOptions().issues(held_out=small_heldout)
    assert list(issues) == nlbse_test
    assert source == "NLBSE'24 test split (nlbse24-issue-report-classification/issues_test.csv)"


def test_without_nlbse_beside_the_checkout_the_gate_uses_the_registrations_held_out_issues(
        registry, decisive_minilm, gate_issues, without_shared):
    """An installed package or a container has no ../shared: the issues the caller held out gate it."""
    model = add_to_registry(registry, decisive_minilm, held_out=gate_issues)
    gate = model.card.fast_path["gates"][SERVES]
    assert gate["issues"] == len(gate_issues)
    assert gate["issues_source"] == f"the {len(gate_issues)} held-out issues of the registration"


AMX = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile"})
# bf16 instructions without AMX: ONNX Runtime's int8 first, then OpenVINO's bf16 and int8, then ORT's fp32
ZEN4 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})
AVX2 = frozenset({"avx2", "fma"})  # no bf16 instructions
OPENVINO = (engines.OV_INT8, engines.OV_BF16)


@pytest.fixture(scope="module")
def registered_with_openvino(tmp_path_factory, decisive_minilm, small_heldout, nlbse_train) -> Path:
    """The decisive model registered on an AMX CPU with training issues to calibrate static int8 on, as
    `train_and_register` passes them: every engine exported and gated."""
    root = tmp_path_factory.mktemp("openvino-registry")
    factory = make_sessionmaker(f"sqlite:///{root / 'registry.db'}")
    Base.metadata.create_all(factory.kw["bind"])
    with session_scope(factory) as session:
        model = Registry(root / "models", session).register(decisive_minilm)
    build_fast_path(model, small_heldout, source="given by the caller", cpu_flags=AMX,
                    calibration=[issue.text for issue in balanced(nlbse_train, 4)])
    return model.directory


def test_a_registration_gates_openvino_int8_and_bf16_and_keeps_the_artefacts_of_those_that_passed(
        registered_with_openvino, gate_issues):
    record = read_card(registered_with_openvino)["fast_path"]
    for engine in OPENVINO:
        gate = record["gates"][engine]
        assert gate["issues"] == len(gate_issues) and "top_label_agreement" in gate and "memory_agreement" in gate
        holds = (is_same_answers(gate["macro_f1_pytorch"], gate["macro_f1_fast"], gate["top_label_agreement"])
                 and is_same_answers(gate["macro_f1_pytorch_memory"], gate["macro_f1_fast_memory"],
                                     gate["memory_agreement"]))
        assert gate["passed"] is holds  # the same rule as every engine's
        assert (engine in record["artefacts"]) is gate["passed"]
    kept = {engine: registered_with_openvino / artefact["file"] for engine, artefact in record["artefacts"].items()}
    assert kept.get(engines.OV_BF16, kept[SERVES_FP32]) == kept[SERVES_FP32]  # bf16 runs the fused fp32 graph
    assert sorted(p.name for p in (registered_with_openvino / "fast").iterdir()) == sorted(
        {path.name for path in kept.values()})  # nothing that failed its gate is left on disk


@pytest.mark.parametrize("engine", OPENVINO)
def test_each_openvino_engine_serves_with_pytorchs_answers_when_forced(registered_with_openvino, gate_issues,
                                                                      engine):
    """Whatever its gate said on this model, the artefact loads and runs under OpenVINO: forced, it serves
    when its gate passed, else the next engine does."""
    record = read_card(registered_with_openvino)["fast_path"]
    served = load_classifier(registered_with_openvino, engine=engine, threads=1)
    if not record["gates"][engine]["passed"]:
        assert served.engine != engine
        return
    assert isinstance(served, OpenVinoClassifier) and served.engine == engine
    same = sum(a == b for a, b in zip(top_labels(served, gate_issues),
                                      top_labels(pytorch(registered_with_openvino), gate_issues)))
    assert same / len(gate_issues) >= MIN_AGREEMENT
    vectors = served.embed([issue.text for issue in gate_issues[:4]])
    assert all(abs(sum(a * a for a in vector) - 1) < 1e-3 for vector in vectors)  # the memory's unit vectors


def test_the_gate_passes_an_engine_that_answers_as_pytorch_and_refuses_one_that_does_not(gate_issues):
    rules = {"crash": "bug", "error": "bug", "add": "feature", "support": "feature", "how": "question"}
    reference = served_answers(FakeEncoder(rules), gate_issues)
    disagreeing = FakeEncoder({"crash": "question", "add": "bug", "how": "feature"})
    gates = gate_engines(reference, [(engines.OV_INT8, FakeEncoder(rules)), (engines.OV_BF16, disagreeing)],
                         gate_issues)
    assert gates[engines.OV_INT8]["passed"] and gates[engines.OV_INT8]["top_label_agreement"] == 1.0
    assert not gates[engines.OV_BF16]["passed"] and gates[engines.OV_BF16]["top_label_agreement"] < MIN_AGREEMENT


def test_without_openvino_installed_its_engines_are_not_gated_and_onnx_runtime_serves(
        register, decisive_minilm, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "openvino", None)  # `import openvino` fails as where it is not installed
    model = register(decisive_minilm, cpu_flags=ONNX_FIRST_CPU)
    record = read_card(model.directory)["fast_path"]
    for engine in OPENVINO:
        assert record["gates"][engine] == {
            "passed": False, "reason": "not gated: OpenVINO is not installed where it was registered"}
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        served = load_classifier(model.directory, engine=engines.OV_INT8, hardware=ONNX_FIRST)
    assert isinstance(served, OnnxClassifier) and served.engine in FAST_ENGINES
    assert "openvino-int8 does not serve" in caplog.text


def test_a_first_model_gates_the_engine_its_cpu_serves_and_the_others_later_as_if_gated_at_once(
        registry, decisive_minilm, gate_issues):
    """`issue-sorter run`'s first model: the engines of its CPU's order are gated in turn until one passes,
    the one its workers serve; the others wait (their graphs kept) for the training worker's `gate_pending`,
    which records the verdicts a registration gating every engine at once gives."""
    first = registry.register(decisive_minilm)
    card = build_fast_path(first, gate_issues, source="given by the caller", cpu_flags=ZEN4, all_engines=False)
    gates = card.fast_path["gates"]
    order = [engine for engine in dict.fromkeys((*engines.preference(ZEN4), *engines.ENGINES))  # then others'
             if "top_label_agreement" in gates.get(engine, {}) or gates.get(engine, {}).get("pending")]
    ran = [engine for engine in order if "top_label_agreement" in gates[engine]]
    assert ran and ran == order[:len(ran)]  # in the CPU's order, from its fastest
    assert [gates[engine]["passed"] for engine in ran] == [False] * (len(ran) - 1) + [True]  # until one passed
    waiting = [engine for engine in order if gates[engine].get("pending")]
    assert waiting == order[len(ran):] and waiting  # the others wait, each saying so
    assert all(gates[engine] == {"passed": False, "pending": True, "reason": PENDING} for engine in waiting)
    directory = first.encoder_directory
    assert all((directory / "fast" / engines.TABLE[engine].graph).is_file()
               for engine in waiting if engines.TABLE[engine].graph)
    assert load_classifier(directory, hardware=engines.Hardware(ZEN4)).engine == ran[-1]
    passed_over_as_pending = set()
    for flags in (AMX, AVX2):  # workers on other CPUs: what is pending there is passed over, saying so
        elsewhere = engines.choose(card, lambda name: name, hardware=engines.Hardware(flags))
        assert elsewhere.engine in (ran[-1], engines.TORCH_FP32)
        tried = engines.order(engines.AUTO, flags)
        for engine in tried[:tried.index(elsewhere.engine)]:
            if engine in waiting:
                assert elsewhere.passed_over[engine] == PENDING
                passed_over_as_pending.add(engine)
    assert passed_over_as_pending

    later = gate_pending(registry.model(first.version), gate_issues, source="given by the caller", cpu_flags=ZEN4)
    at_once = build_fast_path(registry.register(decisive_minilm), gate_issues, source="given by the caller",
                              cpu_flags=ZEN4)
    assert not any(gate.get("pending") for gate in later.fast_path["gates"].values())
    assert later == ModelCard.read(directory)
    for engine, gate in at_once.fast_path["gates"].items():
        assert {name: later.fast_path["gates"][engine].get(name) for name in ("passed", "top_label_agreement")} \
            == {name: gate.get(name) for name in ("passed", "top_label_agreement")}, engine
    assert later.fast_path["artefacts"].keys() == at_once.fast_path["artefacts"].keys()
    assert later.fast_path["serves"] == at_once.fast_path["serves"]
    assert sorted(path.name for path in (directory / "fast").iterdir()) == sorted(
        {Path(kept["file"]).name for kept in later.fast_path["artefacts"].values()})  # the refused went
    assert gate_pending(registry.model(first.version), gate_issues) == later  # nothing left: nothing run


def test_the_training_worker_gates_the_engines_a_first_model_left_pending_on_nlbses_test_split(
        registry, session, database_url, model_dir, redis, decisive_minilm, gate_issues, nlbse_test):
    """What `issue-sorter run` queues after its first model (`queue_pending_gates`), the training worker
    runs: every pending engine gated on the issues a registration gates on (NLBSE'24's test split)."""
    first = registry.register(decisive_minilm)
    card = build_fast_path(first, gate_issues, cpu_flags=ZEN4, all_engines=False)
    session.commit()
    pending = [engine for engine, gate in card.fast_path["gates"].items() if gate.get("pending")]
    assert jobs.queue_pending_gates(redis, registry.model(first.version)) == pending and pending
    (queued,) = make_queue(redis, TRAINING_QUEUE).get_jobs()
    assert (queued.func_name, queued.kwargs) == (GATE_PENDING.name, {"version": first.version})
    assert queued.retries_left == CRASH_RETRY.max  # a worker killed mid-run: the next one runs it again
    settings = dataclasses.replace(Settings(webhook_secret="s"), database_url=database_url, model_dir=model_dir)
    context.configure(TrainingContext(settings, make_sessionmaker(database_url), redis))
    try:
        message = jobs.gate_pending_engines(**queued.kwargs)
        gone = jobs.gate_pending_engines(version="no-such-version")
    finally:
        context.configure(None)
    gates = ModelCard.read(first.directory).fast_path["gates"]
    assert not any(gate.get("pending") for gate in gates.values())
    for engine in pending:
        assert gates[engine].get("issues", len(nlbse_test)) == len(nlbse_test)  # gated on the split, or said why not
        assert ("top_label_agreement" in gates[engine]) is (f"{engine} " in message), message
    assert jobs.queue_pending_gates(redis, registry.model(first.version)) == []  # nothing left to queue
    assert gone.startswith("no-such-version: pending gates not run: ")  # said, not a failed job
