"""Which engine serves an encoder where the worker runs: the CPU's order among the engines its registration's
gate allowed, a forced one first, and a clean fallback (missing, failing to load, refused), each logged."""

import logging
import subprocess
import sys

import pytest

from core import engines
from core.card import ModelCard
from core.engines import (
    ORT_FP32,
    ORT_INT8,
    OV_BF16,
    OV_INT8,
    TORCH_BF16,
    TORCH_FP32,
    Hardware,
    choose,
    cpu_flags,
    cuda_available,
    order,
)
from tests.paths import REPO_ROOT

ZEN4 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})  # AVX-512 BF16, no AMX (Zen 5 alike)
AVX2 = frozenset({"avx2", "fma"})  # Zen 3, say: no AVX-512, no bf16 instructions
SAPPHIRE_RAPIDS = ZEN4 | {"amx_bf16", "amx_int8", "amx_tile"}
PASSED = {"passed": True, "issues": 45, "top_label_agreement": 1.0, "macro_f1_fast": 0.8, "macro_f1_pytorch": 0.8}
REFUSED = PASSED | {"passed": False, "top_label_agreement": 0.955}


def card(gates: dict[str, dict], kept=(ORT_INT8, ORT_FP32)) -> ModelCard:
    """A card whose registration gated these engines and kept these artefacts."""
    artefacts = {engine: {"file": f"fast/{engine}.onnx", "sha256": "0" * 64} for engine in kept}
    return ModelCard(version="v1", labels=["bug", "feature"],
                     extra={"fast_path": {"serves": next(iter(artefacts), "pytorch"), "gates": gates,
                                          "artefacts": artefacts}})


ALL_PASSED = card({ORT_INT8: PASSED, ORT_FP32: PASSED, TORCH_BF16: PASSED})  # registered before OpenVINO
ONNX_PASSED = card({ORT_INT8: PASSED, ORT_FP32: PASSED})  # registered where bf16 was not gated
EVERY_ENGINE_PASSED = card({OV_INT8: PASSED, OV_BF16: PASSED, ORT_INT8: PASSED, ORT_FP32: PASSED, TORCH_BF16: PASSED},
                           kept=(OV_INT8, OV_BF16, ORT_INT8, ORT_FP32))


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


def test_the_cpus_flags_order_the_engines_openvino_only_where_bf16_is_native():
    assert order("auto", SAPPHIRE_RAPIDS) == (OV_BF16, OV_INT8, TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
    # AVX-512 BF16 without AMX (measured on a Zen 4 and a Zen 5): ORT's int8 on VNNI, then OpenVINO's bf16 and
    # int8, all faster than ORT's fp32; then ORT's fp32 (PyTorch's answers, less memory) before bf16 autocast
    assert order("auto", ZEN4) == (ORT_INT8, OV_BF16, OV_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32)
    assert order("auto", {"avx2", "fma"}) == (ORT_INT8, ORT_FP32, TORCH_FP32)  # bf16 emulated: not tried
    assert order("auto", {"avx512f", "avx512_vnni"}) == (ORT_INT8, ORT_FP32, TORCH_FP32)  # Ice Lake: no bf16


def test_on_zen4_onnx_runtime_serves_before_bf16_and_bf16_before_fp32_pytorch(caplog):
    assert choose(ALL_PASSED, FakeEngines(), hardware=Hardware(ZEN4)).engine == ORT_INT8
    refused_int8 = card({ORT_INT8: REFUSED, ORT_FP32: PASSED, TORCH_BF16: PASSED}, kept=(ORT_FP32,))
    # a bootstrap model registered before OpenVINO: never gated for it
    assert choose(refused_int8, FakeEngines(), hardware=Hardware(ZEN4)).engine == ORT_FP32
    with_openvino = card({ORT_INT8: REFUSED, OV_BF16: PASSED, ORT_FP32: PASSED, TORCH_BF16: PASSED},
                         kept=(OV_BF16, ORT_FP32))  # today's: int8 refused, OpenVINO's bf16 passed
    assert choose(with_openvino, FakeEngines(), hardware=Hardware(ZEN4)).engine == OV_BF16
    no_onnxruntime = FakeEngines(onnxruntime_int8=ImportError("no onnxruntime"),
                                 onnxruntime_fp32=ImportError("no onnxruntime"))
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(ALL_PASSED, no_onnxruntime, hardware=Hardware(ZEN4))
    assert chosen.engine == TORCH_BF16 and no_onnxruntime.loaded == [ORT_INT8, ORT_FP32, TORCH_BF16]
    assert "serving v1 with pytorch-bf16" in caplog.text
    assert choose(ALL_PASSED, FakeEngines(), hardware=Hardware(SAPPHIRE_RAPIDS)).engine == TORCH_BF16
    assert choose(ALL_PASSED, FakeEngines(), hardware=Hardware(AVX2)).engine == ORT_INT8


def test_where_pytorch_sees_a_gpu_fp32_pytorch_serves_on_it_whatever_the_cpu(caplog):
    for flags in (SAPPHIRE_RAPIDS, ZEN4, AVX2):
        assert order("auto", flags, gpu=True) == (TORCH_FP32,)
    with caplog.at_level(logging.INFO, logger="core.engines"):
        assert choose(ALL_PASSED, FakeEngines(), hardware=Hardware(SAPPHIRE_RAPIDS, gpu=True)).engine == TORCH_FP32
    assert "serving v1 with pytorch (PyTorch on the GPU; CPU" in caplog.text and "; on the GPU)" in caplog.text
    # the operator's choice still comes first: ONNX Runtime on the CPU, beside the GPU
    assert order(ORT_INT8, AVX2, gpu=True) == (ORT_INT8, TORCH_FP32)
    assert choose(ALL_PASSED, FakeEngines(), forced=ORT_INT8, hardware=Hardware(AVX2, gpu=True)).engine == ORT_INT8


@pytest.mark.e2e  # a Python process of its own: what it imports
def test_without_nvidias_driver_the_gpu_check_does_not_import_torch(tmp_path):
    """A worker serving with ONNX Runtime on a CPU machine never loads torch just to look for a GPU."""
    code = ("import sys; from pathlib import Path; from core.engines import cuda_available; "
            f"print(cuda_available(Path({str(tmp_path / 'nvidiactl')!r})), 'torch' in sys.modules)")
    answer = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert answer.stdout.split() == ["False", "False"]


def test_with_nvidias_driver_the_gpu_is_the_one_torch_can_use(tmp_path, monkeypatch):
    import torch

    control = tmp_path / "nvidiactl"
    control.touch()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU build of torch beside the driver
    assert cuda_available(control) is False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cuda_available(control) is True


def test_a_forced_engine_is_tried_first_then_the_cpus_order():
    assert order(ORT_FP32, AVX2) == (ORT_FP32, ORT_INT8, TORCH_FP32)
    assert order(TORCH_BF16, AVX2) == (TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
    assert order(TORCH_FP32, AVX2) == (TORCH_FP32, ORT_INT8, ORT_FP32)
    assert order(ORT_FP32, ZEN4) == (ORT_FP32, ORT_INT8, OV_BF16, OV_INT8, TORCH_BF16, TORCH_FP32)
    assert order(ORT_FP32, SAPPHIRE_RAPIDS) == (ORT_FP32, OV_BF16, OV_INT8, TORCH_BF16, ORT_INT8, TORCH_FP32)
    assert order(OV_BF16, ZEN4) == (OV_BF16, ORT_INT8, OV_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32)


def test_measure_tries_every_engine_the_cpus_order_first():
    # bf16 and OpenVINO timed where they were gated, though not ordered on this CPU
    assert order("measure", AVX2) == (ORT_INT8, ORT_FP32, OV_INT8, OV_BF16, TORCH_BF16, TORCH_FP32)
    assert order("measure", ZEN4) == (ORT_INT8, OV_BF16, OV_INT8, ORT_FP32, TORCH_BF16, TORCH_FP32)
    assert order("measure", SAPPHIRE_RAPIDS) == (OV_BF16, OV_INT8, TORCH_BF16, ORT_INT8, ORT_FP32, TORCH_FP32)
    with pytest.raises(ValueError, match="an engine is one of auto, measure, openvino-int8"):
        order("cuda", ZEN4)


def test_the_fastest_allowed_engine_serves_and_the_choice_is_logged(caplog):
    load = FakeEngines()
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(EVERY_ENGINE_PASSED, load, hardware=Hardware(SAPPHIRE_RAPIDS))
    assert (chosen.engine, chosen.classifier, chosen.passed_over) == (OV_BF16, "classifier run by openvino-bf16", {})
    assert load.loaded == [OV_BF16]  # nothing else loaded
    assert "serving v1 with openvino-bf16 (the CPU's fastest allowed; CPU avx2 avx512f avx512_vnni avx512_bf16 " \
           "amx_bf16 amx_int8)" in caplog.text


def test_an_engine_refused_by_its_gate_is_never_loaded_and_the_next_one_serves(caplog):
    refused_int8 = card({ORT_INT8: REFUSED, ORT_FP32: PASSED, TORCH_BF16: PASSED}, kept=(ORT_FP32,))
    load = FakeEngines()
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(refused_int8, load, hardware=Hardware(AVX2))
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
        chosen = choose(ALL_PASSED, load, hardware=Hardware(AVX2))
    assert chosen.engine == ORT_FP32 and load.loaded == [ORT_INT8, ORT_FP32]
    assert f"onnxruntime-int8 does not serve v1: it could not be loaded ({type(error).__name__}: {error})" \
        in caplog.text


def test_with_every_fast_engine_broken_fp32_pytorch_serves():
    load = FakeEngines(onnxruntime_int8=ImportError("no onnxruntime"), onnxruntime_fp32=ImportError("no onnxruntime"))
    chosen = choose(ALL_PASSED, load, hardware=Hardware(AVX2))
    assert chosen.engine == TORCH_FP32 and set(chosen.passed_over) == {ORT_INT8, ORT_FP32}


def test_fp32_pytorch_failing_to_load_is_an_error_not_a_silent_model_less_worker():
    load = FakeEngines(pytorch=OSError("model.safetensors: no such file"))
    with pytest.raises(OSError, match="model.safetensors"):
        choose(card({}, kept=()), load, hardware=Hardware(AVX2))


def test_a_model_without_a_fast_path_is_served_by_fp32_pytorch_saying_why(caplog):
    bare = ModelCard(version="v0", labels=["bug", "feature"])
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        assert choose(bare, FakeEngines(), hardware=Hardware(SAPPHIRE_RAPIDS)).engine == TORCH_FP32
    assert "pytorch-bf16 does not serve v0: no fast path was built for it" in caplog.text


def test_a_forced_engine_serves_when_its_gate_passed(caplog):
    with caplog.at_level(logging.INFO, logger="core.engines"):
        assert choose(ALL_PASSED, FakeEngines(), forced=ORT_FP32, hardware=Hardware(AVX2)).engine == ORT_FP32
    assert "forced by ISSUE_SORTER_ENGINE" in caplog.text


def test_a_forced_engine_its_gate_refused_falls_back_with_a_warning(caplog):
    bf16_refused = card({ORT_INT8: PASSED, ORT_FP32: PASSED, TORCH_BF16: REFUSED})
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        chosen = choose(bf16_refused, FakeEngines(), forced=TORCH_BF16, hardware=Hardware(SAPPHIRE_RAPIDS))
    assert chosen.engine == ORT_INT8
    assert "pytorch-bf16 does not serve v1: its registration's same-answers gate refused it" in caplog.text
    # a warning: the operator asked for another
    assert "serving v1 with onnxruntime-int8 (ISSUE_SORTER_ENGINE asked for pytorch-bf16; passed over: " \
           "pytorch-bf16, openvino-bf16, openvino-int8; CPU" in caplog.text


def test_an_engine_its_registration_never_gated_does_not_serve():
    int8_only = card({ORT_INT8: PASSED}, kept=(ORT_INT8,))
    chosen = choose(int8_only, FakeEngines(), hardware=Hardware(SAPPHIRE_RAPIDS))
    assert chosen.engine == ORT_INT8 and chosen.passed_over == dict.fromkeys((OV_INT8, OV_BF16, TORCH_BF16),
                                                                             "its registration did not gate it")


def test_a_card_of_the_previous_format_allows_the_one_artefact_it_kept():
    old = ModelCard(version="v0", labels=["bug"], extra={"fast_path": {
        "serves": ORT_FP32, "file": "fast/model.fp32.onnx", "sha256": "ab", "gate": PASSED,
        "gates": {ORT_INT8: REFUSED}}})
    assert engines.artefacts(old) == {ORT_FP32: {"file": "fast/model.fp32.onnx", "sha256": "ab"}}
    assert choose(old, FakeEngines(), hardware=Hardware(AVX2)).engine == ORT_FP32


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


class Clock:
    """Seconds that pass only when a fake engine labels an issue."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedEngine:
    """A loaded engine that takes `ms` milliseconds of `clock` per issue, and records what it labelled."""

    def __init__(self, engine: str, ms: float, clock: Clock):
        self.engine, self.ms, self.clock, self.texts, self.version = engine, ms, clock, [], "v1"
        self.labels, self.card = ["bug", "feature"], ModelCard(version="v1", labels=["bug", "feature"])

    def predict(self, texts, batch_size=16):
        self.texts += list(texts)
        self.clock.now += self.ms / 1000 * len(texts)
        return [{"bug": 0.9, "feature": 0.1} for _ in texts]

    def embed(self, texts, batch_size=16):
        return [[1.0, 0.0] for _ in texts]

    def predict_and_embed(self, texts, batch_size=16):
        return self.predict(texts), self.embed(texts)


class TimedEngines(FakeEngines):
    def __init__(self, ms: dict[str, float], **broken: Exception):
        super().__init__(**broken)
        self.clock, self.ms, self.made = Clock(), ms, {}

    def __call__(self, engine: str):
        super().__call__(engine)
        self.made[engine] = TimedEngine(engine, self.ms[engine], self.clock)
        return self.made[engine]


def test_measure_loads_every_allowed_engine_but_runs_none_until_first_used(caplog):
    load = TimedEngines({ORT_INT8: 9.0, ORT_FP32: 14.0, TORCH_FP32: 30.0})
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(ONNX_PASSED, load, forced=engines.MEASURE, hardware=Hardware(AVX2), clock=load.clock)
    assert load.loaded == [ORT_INT8, ORT_FP32, TORCH_FP32]
    assert chosen.classifier.engine is None and not any(made.texts for made in load.made.values())
    assert engines.served_engine(chosen.classifier) is None  # nothing to record for /metrics yet
    assert "loaded onnxruntime-int8, onnxruntime-fp32, pytorch for v1" in caplog.text


def test_measure_serves_the_engine_measured_fastest_and_logs_every_timing(caplog):
    """On a CPU where the flags' order is wrong (fp32 beats int8 here), the measurement decides."""
    load = TimedEngines({ORT_INT8: 20.0, ORT_FP32: 12.0, TORCH_BF16: 80.0, TORCH_FP32: 30.0})
    chosen = choose(ALL_PASSED, load, forced=engines.MEASURE, hardware=Hardware(AVX2), clock=load.clock).classifier
    recorded = []
    engines.when_served(chosen, recorded.append)
    assert recorded == []  # not measured yet
    with caplog.at_level(logging.INFO, logger="core.engines"):
        answer = chosen.predict(["the first issue"])
    assert chosen.engine == ORT_FP32 and engines.served_engine(chosen) == ORT_FP32 and recorded == [ORT_FP32]
    # bf16, gated where it was registered, is timed here too: emulated without bf16 instructions, it loses
    assert chosen.milliseconds == {ORT_INT8: 20.0, ORT_FP32: 12.0, TORCH_BF16: 80.0, TORCH_FP32: 30.0}
    assert answer == [{"bug": 0.9, "feature": 0.1}] and load.made[ORT_FP32].texts[-1] == "the first issue"
    rounds = len(engines.MEASURE_TEXTS) * (engines.MEASURE_ROUNDS + 1)  # one round warms up, untimed
    assert [len(made.texts) for made in load.made.values()] == [rounds, rounds + 1, rounds, rounds]
    assert (f"serving v1 with onnxruntime-fp32 (measured on {len(engines.MEASURE_TEXTS)} fixed issues, one at a "
            f"time, best of {engines.MEASURE_ROUNDS}: onnxruntime-int8 20.0 ms, onnxruntime-fp32 12.0 ms, "
            "pytorch-bf16 80.0 ms, pytorch 30.0 ms an issue; passed over: openvino-int8, openvino-bf16)") \
        in caplog.text  # registered before OpenVINO: never gated
    chosen.predict(["again"])
    assert load.made[ORT_INT8].texts.count("again") == 0  # measured once; the others are released


def test_measure_keeps_the_cpus_order_when_the_timings_are_within_noise():
    load = TimedEngines({ORT_INT8: 10.0, ORT_FP32: 9.8, TORCH_FP32: 30.0})  # 2 % apart
    chosen = choose(ONNX_PASSED, load, forced=engines.MEASURE, hardware=Hardware(AVX2), clock=load.clock).classifier
    chosen.embed(["any use measures"])
    assert chosen.engine == ORT_INT8


def test_measure_times_only_engines_the_gate_allowed_and_that_load(caplog):
    refused_int8 = card({ORT_INT8: REFUSED, ORT_FP32: PASSED, TORCH_BF16: PASSED}, kept=(ORT_FP32,))
    load = TimedEngines({ORT_FP32: 12.0, TORCH_BF16: 8.0, TORCH_FP32: 30.0},
                        pytorch_bf16=RuntimeError("no bf16 kernels"))
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(refused_int8, load, forced=engines.MEASURE, hardware=Hardware(ZEN4), clock=load.clock)
        chosen.classifier.predict(["x"])
    assert load.loaded == [ORT_FP32, TORCH_BF16, TORCH_FP32]
    assert set(chosen.passed_over) == {ORT_INT8, TORCH_BF16, OV_INT8, OV_BF16}  # OpenVINO: never gated
    assert chosen.classifier.milliseconds == {ORT_FP32: 12.0, TORCH_FP32: 30.0}
    assert "pytorch-bf16 does not serve v1: it could not be loaded (RuntimeError: no bf16 kernels)" in caplog.text
    assert "passed over: onnxruntime-int8, openvino-bf16, openvino-int8, pytorch-bf16" in caplog.text


def test_measure_with_one_engine_allowed_serves_it_at_once_without_timing():
    load = TimedEngines({TORCH_FP32: 30.0})
    chosen = choose(ModelCard(version="v0", labels=["bug", "feature"]), load, forced=engines.MEASURE,
                    hardware=Hardware(AVX2), clock=load.clock)
    assert chosen.engine == TORCH_FP32 and chosen.classifier is load.made[TORCH_FP32]
    assert load.made[TORCH_FP32].texts == []


def test_measure_with_nothing_loadable_raises_fp32_pytorchs_error():
    load = TimedEngines({}, onnxruntime_int8=ImportError("no onnxruntime"), onnxruntime_fp32=ImportError("no ORT"),
                        pytorch=OSError("model.safetensors: no such file"))
    with pytest.raises(OSError, match="model.safetensors"):
        choose(ONNX_PASSED, load, forced=engines.MEASURE, hardware=Hardware(AVX2))


def test_a_blend_over_a_measured_encoder_is_recorded_once_measured():
    from core.classifier import BlendedClassifier

    load = TimedEngines({ORT_INT8: 9.0, TORCH_FP32: 30.0})
    int8_only = card({ORT_INT8: PASSED}, kept=(ORT_INT8,))
    encoder = choose(int8_only, load, forced=engines.MEASURE, hardware=Hardware(AVX2), clock=load.clock).classifier
    tfidf = TimedEngine("tfidf", 0.0, load.clock)
    blend = BlendedClassifier(encoder, tfidf, 0.5)
    recorded = []
    engines.when_served(blend, recorded.append)
    blend.predict(["warm-up"])
    assert recorded == [ORT_INT8] and engines.served_engine(blend) == ORT_INT8


def test_the_engine_setting_accepts_measure_and_names_the_choices():
    from core.settings import ConfigError, Settings

    assert Settings.from_env({"ISSUE_SORTER_ENGINE": "measure"}, require_webhook_secret=False).engine == "measure"
    with pytest.raises(ConfigError, match="must be auto, measure or one of openvino-int8, openvino-bf16, "
                                          "onnxruntime-int8"):
        Settings.from_env({"ISSUE_SORTER_ENGINE": "fastest"}, require_webhook_secret=False)


def test_measure_passes_over_an_engine_that_loaded_but_fails_to_run(caplog):
    load = TimedEngines({ORT_INT8: 9.0, ORT_FP32: 14.0, TORCH_FP32: 30.0})
    chosen = choose(ONNX_PASSED, load, forced=engines.MEASURE, hardware=Hardware(AVX2), clock=load.clock).classifier

    def broken(texts, batch_size=16):
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION")

    load.made[ORT_INT8].predict = broken
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        chosen.predict(["x"])
    assert chosen.engine == ORT_FP32 and set(chosen.milliseconds) == {ORT_FP32, TORCH_FP32}
    assert "onnxruntime-int8 does not serve v1: it failed on the measurement's issues (RuntimeError" in caplog.text


def test_with_amx_openvino_bf16_serves_first_then_openvino_int8_when_bf16_was_refused(caplog):
    assert choose(EVERY_ENGINE_PASSED, FakeEngines(), hardware=Hardware(SAPPHIRE_RAPIDS)).engine == OV_BF16
    bf16_refused = card({OV_INT8: PASSED, OV_BF16: REFUSED, ORT_INT8: REFUSED, ORT_FP32: PASSED, TORCH_BF16: PASSED},
                        kept=(OV_INT8, ORT_FP32))
    load = FakeEngines()
    with caplog.at_level(logging.INFO, logger="core.engines"):
        chosen = choose(bf16_refused, load, hardware=Hardware(SAPPHIRE_RAPIDS))
    assert chosen.engine == OV_INT8 and load.loaded == [OV_INT8]  # a refused engine is never loaded
    assert "openvino-bf16 does not serve v1: its registration's same-answers gate refused it (top label agreed " \
           "on 95.5% of 45 issues" in caplog.text


def test_without_openvino_installed_the_next_engine_serves_and_says_why(caplog):
    no_openvino = FakeEngines(openvino_int8=ImportError("No module named 'openvino'"),
                              openvino_bf16=ImportError("No module named 'openvino'"))
    with caplog.at_level(logging.WARNING, logger="core.engines"):
        chosen = choose(EVERY_ENGINE_PASSED, no_openvino, hardware=Hardware(SAPPHIRE_RAPIDS))
    assert chosen.engine == TORCH_BF16 and no_openvino.loaded == [OV_BF16, OV_INT8, TORCH_BF16]
    assert "openvino-bf16 does not serve v1: it could not be loaded (ImportError: No module named 'openvino')" \
        in caplog.text


def test_an_openvino_engine_whose_artefact_the_card_does_not_keep_never_serves():
    gated_not_kept = card({OV_INT8: PASSED, OV_BF16: PASSED, ORT_FP32: PASSED}, kept=(ORT_FP32,))
    chosen = choose(gated_not_kept, FakeEngines(), hardware=Hardware(SAPPHIRE_RAPIDS))
    assert chosen.engine == ORT_FP32
    assert chosen.passed_over[OV_INT8] == chosen.passed_over[OV_BF16] == "its registration kept no artefact for it"
