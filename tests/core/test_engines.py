"""Which engine serves an encoder where the worker runs: the CPU's order among the engines its registration's
gate allowed, a forced one first, and a clean fallback (missing, failing to load, refused), each logged."""

import logging

import pytest

from core import engines
from core.card import ModelCard
from core.engines import ORT_FP32, ORT_INT8, TORCH_BF16, TORCH_FP32, choose, cpu_flags, order

ZEN4 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})  # this machine: no AMX
SAPPHIRE_RAPIDS = ZEN4 | {"amx_bf16", "amx_int8", "amx_tile"}
PASSED = {"passed": True, "issues": 45, "top_label_agreement": 1.0, "macro_f1_fast": 0.8, "macro_f1_pytorch": 0.8}
REFUSED = PASSED | {"passed": False, "top_label_agreement": 0.955}


def card(gates: dict[str, dict], kept=(ORT_INT8, ORT_FP32)) -> ModelCard:
    """A card whose registration gated these engines and kept these artefacts."""
    artefacts = {engine: {"file": f"fast/{engine}.onnx", "sha256": "0" * 64} for engine in kept}
    return ModelCard(version="v1", labels=["bug", "feature"],
                     extra={"fast_path": {"serves": next(iter(artefacts), "pytorch"), "gates": gates,
                                          "artefacts": artefacts}})


ALL_PASSED = card({ORT_INT8: PASSED, ORT_FP32: PASSED, TORCH_BF16: PASSED})


class FakeEngines:
    """Loads engines by name; those in `broken` raise the given error, as a missing library or file would."""

    def __init__(self, **broken: Exception):
        self.broken = {name.replace("_", "-"): error for name, error in broken.items()}
        self.loaded: list[str] = []

    def __call__(self, engine: str):
        self.loaded.append(engine)
        if engine in self.broken:
            raise self.broken[engine]
        return f"classifier run by {engine}"


def test_the_cpus_flags_order_the_engines_bf16_first_only_with_amx():
    assert order("auto", SAPPHIRE_RAPIDS) == (TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
    assert order("auto", ZEN4) == (ORT_INT8, ORT_FP32, TORCH_FP32)  # bf16 without AMX: slower than fp32
    assert order("auto", {"avx2"}) == (ORT_INT8, ORT_FP32, TORCH_FP32)


def test_a_forced_engine_is_tried_first_then_the_cpus_order():
    assert order(ORT_FP32, ZEN4) == (ORT_FP32, ORT_INT8, TORCH_FP32)
    assert order(TORCH_BF16, ZEN4) == (TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
    assert order(TORCH_FP32, ZEN4) == (TORCH_FP32, ORT_INT8, ORT_FP32)
    with pytest.raises(ValueError, match="an engine is one of auto, onnxruntime-int8"):
        order("cuda", ZEN4)


def test_the_fastest_allowed_engine_serves_and_the_choice_is_logged(caplog):
    load = FakeEngines()
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(ALL_PASSED, load, flags=SAPPHIRE_RAPIDS)
    assert (chosen.engine, chosen.classifier, chosen.passed_over) == (TORCH_BF16, "classifier run by pytorch-bf16", {})
    assert load.loaded == [TORCH_BF16]  # nothing else loaded
    assert "serving v1 with pytorch-bf16 (the CPU's fastest allowed; CPU avx2 avx512f avx512_vnni avx512_bf16 " \
           "amx_bf16 amx_int8)" in caplog.text


def test_an_engine_refused_by_its_gate_is_never_loaded_and_the_next_one_serves(caplog):
    refused_int8 = card({ORT_INT8: REFUSED, ORT_FP32: PASSED, TORCH_BF16: PASSED}, kept=(ORT_FP32,))
    load = FakeEngines()
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(refused_int8, load, flags=ZEN4)
    assert chosen.engine == ORT_FP32 and load.loaded == [ORT_FP32]
    assert "top label agreed on 95.5% of 45 issues" in chosen.passed_over[ORT_INT8]
    assert "onnxruntime-int8 does not serve v1: its registration's same-answers gate refused it" in caplog.text
    assert "passed over: onnxruntime-int8" in caplog.text


@pytest.mark.parametrize("error", [ImportError("No module named 'onnxruntime'"),
                                   FileNotFoundError("its fast artefact fast/model.int8.onnx is missing"),
                                   RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH")])
def test_an_engine_missing_or_failing_to_load_falls_back_to_the_next(error, caplog):
    load = FakeEngines(onnxruntime_int8=error)
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        chosen = choose(ALL_PASSED, load, flags=ZEN4)
    assert chosen.engine == ORT_FP32 and load.loaded == [ORT_INT8, ORT_FP32]
    assert f"onnxruntime-int8 does not serve v1: it could not be loaded ({type(error).__name__}: {error})" \
        in caplog.text


def test_with_every_fast_engine_broken_fp32_pytorch_serves():
    load = FakeEngines(onnxruntime_int8=ImportError("no onnxruntime"), onnxruntime_fp32=ImportError("no onnxruntime"))
    chosen = choose(ALL_PASSED, load, flags=ZEN4)
    assert chosen.engine == TORCH_FP32 and set(chosen.passed_over) == {ORT_INT8, ORT_FP32}


def test_fp32_pytorch_failing_to_load_is_an_error_not_a_silent_model_less_worker():
    load = FakeEngines(pytorch=OSError("model.safetensors: no such file"))
    with pytest.raises(OSError, match="model.safetensors"):
        choose(card({}, kept=()), load, flags=ZEN4)


def test_a_model_without_a_fast_path_is_served_by_fp32_pytorch_saying_why(caplog):
    bare = ModelCard(version="v0", labels=["bug", "feature"])
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        assert choose(bare, FakeEngines(), flags=SAPPHIRE_RAPIDS).engine == TORCH_FP32
    assert "pytorch-bf16 does not serve v0: no fast path was built for it" in caplog.text


def test_a_forced_engine_serves_when_its_gate_passed(caplog):
    with caplog.at_level(logging.INFO, logger="core.engines"):
        assert choose(ALL_PASSED, FakeEngines(), forced=ORT_FP32, flags=ZEN4).engine == ORT_FP32
    assert "forced by ISSUE_SORTER_ENGINE" in caplog.text


def test_a_forced_engine_its_gate_refused_falls_back_with_a_warning(caplog):
    bf16_refused = card({ORT_INT8: PASSED, ORT_FP32: PASSED, TORCH_BF16: REFUSED})
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        chosen = choose(bf16_refused, FakeEngines(), forced=TORCH_BF16, flags=SAPPHIRE_RAPIDS)
    assert chosen.engine == ORT_INT8
    assert "pytorch-bf16 does not serve v1: its registration's same-answers gate refused it" in caplog.text
    # a warning: the operator asked for another
    assert "serving v1 with onnxruntime-int8 (ISSUE_SORTER_ENGINE asked for pytorch-bf16; passed over: " \
           "pytorch-bf16; CPU" in caplog.text


def test_an_engine_its_registration_never_gated_does_not_serve():
    int8_only = card({ORT_INT8: PASSED}, kept=(ORT_INT8,))
    chosen = choose(int8_only, FakeEngines(), flags=SAPPHIRE_RAPIDS)
    assert chosen.engine == ORT_INT8 and chosen.passed_over == {TORCH_BF16: "its registration did not gate it"}


def test_a_card_of_the_previous_format_allows_the_one_artefact_it_kept():
    old = ModelCard(version="v0", labels=["bug"], extra={"fast_path": {
        "serves": ORT_FP32, "file": "fast/model.fp32.onnx", "sha256": "ab", "gate": PASSED,
        "gates": {ORT_INT8: REFUSED}}})
    assert engines.artefacts(old) == {ORT_FP32: {"file": "fast/model.fp32.onnx", "sha256": "ab"}}
    assert choose(old, FakeEngines(), flags=ZEN4).engine == ORT_FP32


def test_the_cpus_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni amx_bf16\nbugs\t\t: spectre\n")
    assert cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "avx512_vnni", "amx_bf16"}
    assert cpu_flags(str(tmp_path / "none")) == frozenset()  # not Linux: no flags, the AVX2 order


def test_each_worker_records_its_engine_in_redis(redis):
    engines.record_engine(redis, "global", "v1", ORT_INT8, process="host-a:12")
    engines.record_engine(redis, "global", "v1", TORCH_BF16, process="host-b:7")
    assert redis.hgetall(engines.ENGINES_KEY) == {b"host-a:12|global": b"v1|onnxruntime-int8",
                                                  b"host-b:7|global": b"v1|pytorch-bf16"}
