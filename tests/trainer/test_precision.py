"""Training precision: decided once per kind of CPU by a short run of bf16 against fp32, kept under the model
directory (or shipped with the project), and read by every training after it, which then trains once."""

import dataclasses
import json
import logging

import pytest

from core.card import read_card
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.precision import (
    SHIPPED_VERDICTS,
    CpuKind,
    MeasureOptions,
    PrecisionChoice,
    Verdict,
    Verdicts,
    bf16_holds,
    fine_tune_for_cpu,
    noise,
    speedup,
)
from trainer.train import TrainedModel, fine_tune

AMX = CpuKind("GenuineIntel", frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}))
ZEN4 = CpuKind("AuthenticAMD", frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}))
AVX2 = CpuKind("AuthenticAMD", frozenset({"avx2", "fma"}))
LEARNT = [Example(f"t{n}", "b", ("bug", "feature")[n % 2]) for n in range(300)]  # what the fakes learn from
QUICK = MeasureOptions(steps=3, held_out=60, min_issues=100)


class FakeTraining:
    """Records each training run (its precision, and its step limit: a measurement's are short)."""

    def __init__(self, f1: dict[str, float] | None = None):
        self.f1, self.runs = f1 or {"bf16": 0.8, "fp32": 0.8}, []

    def train(self, config, examples, labels, *, progress, precision):
        self.runs.append(precision if config.max_steps is None else f"{precision} x{config.max_steps}")
        return TrainedModel(model=None, tokenizer=None, labels=["bug", "feature"], config=config, base_model="b",
                            seconds={"bf16": 60.0, "fp32": 78.0}[precision], steps=config.max_steps or 19,
                            precision=precision)

    def score(self, trained, held_out):
        return self.f1[trained.precision]


def trained_on(kind, verdicts, training=None, config=TrainConfig(), examples=LEARNT) -> tuple[TrainedModel, list]:
    training = training or FakeTraining()
    trained = fine_tune_for_cpu(config, examples, None, choice=PrecisionChoice(verdicts, kind, QUICK),
                                progress=False, train=training.train, score=training.score)
    return trained, training.runs


@pytest.fixture
def verdicts(tmp_path) -> Verdicts:
    """This App's verdicts under its model directory, with no shipped ones."""
    return Verdicts(tmp_path / "models" / "precision-verdicts.json", shipped=tmp_path / "none-shipped.json")


def test_the_cpu_kind_is_its_maker_and_bf16_flags_read_from_cpuinfo_whatever_its_model():
    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
            "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile "
            "amx_int8\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n")
    kind = CpuKind.from_cpuinfo(text)
    assert kind.vendor == "GenuineIntel" and kind.key == "GenuineIntel avx512f avx512_bf16 amx_tile amx_bf16"
    assert CpuKind.from_cpuinfo(text.replace("207", "143")).key == kind.key  # another model, the same verdict
    assert AVX2.key == "AuthenticAMD"  # no bf16 flag: nothing else in the key


def test_a_second_training_reads_the_verdict_the_first_measured_and_trains_once(verdicts):
    first, runs = trained_on(AMX, verdicts)
    assert runs == ["bf16 x3", "fp32 x3", "bf16"]  # the short measurement of each, then the training
    kept = json.loads(verdicts.path.read_text())[AMX.key]
    assert kept["precision"] == "bf16" and kept["speedup"] == 1.3 and kept["steps"] == 3
    assert first.precision == "bf16" and first.precision_verdict["source"] == "measured here"
    second, runs = trained_on(AMX, verdicts)  # the next bootstrap or retraining, same model directory
    assert runs == ["bf16"]
    assert second.precision_verdict == first.precision_verdict


def test_the_verdicts_speed_is_its_median_steps_not_the_first_runs_warm_up():
    """The precision measured first pays the process's first steps; each step's median leaves them out."""
    def run(precision, step_seconds, seconds=None):
        return TrainedModel(model=None, tokenizer=None, labels=["bug"], config=TrainConfig(), base_model="b",
                            seconds=seconds or sum(step_seconds), steps=len(step_seconds), precision=precision,
                            step_seconds=step_seconds)

    bf16 = run("bf16", [9.0, 7.0, 0.4, 0.5, 0.4, 0.6, 0.5])  # measured first: two slow first steps
    fp32 = run("fp32", [0.8, 0.7, 0.8, 0.7, 0.75, 0.8, 0.7])
    assert fp32.seconds / bf16.seconds < 1  # whole runs would call bf16 the slower
    assert speedup(bf16, fp32) == 1.5
    assert speedup(run("bf16", [], 60.0), run("fp32", [], 78.0)) == 1.3  # steps not timed: the whole runs


def test_a_verdict_that_bf16_lost_quality_makes_every_training_fp32(verdicts, caplog):
    with caplog.at_level(logging.WARNING, logger="trainer.precision"):
        trained, runs = trained_on(AMX, verdicts, FakeTraining({"bf16": 0.60, "fp32": 0.80}))
    assert runs == ["bf16 x3", "fp32 x3", "fp32"] and trained.precision == "fp32"
    assert "bf16 macro-F1 0.6000 against fp32's 0.8000" in caplog.text
    again, runs = trained_on(AMX, verdicts, FakeTraining({"bf16": 0.60, "fp32": 0.80}))
    assert runs == ["fp32"] and again.precision_verdict["macro_f1_bf16"] == 0.6


def test_another_kind_of_cpu_measures_its_own_verdict_beside_the_first(verdicts):
    trained_on(AMX, verdicts)
    _, runs = trained_on(ZEN4, verdicts)
    assert runs == ["bf16 x3", "fp32 x3", "bf16"]
    assert set(json.loads(verdicts.path.read_text())) == {AMX.key, ZEN4.key}


def test_a_shipped_verdict_is_read_and_this_apps_own_measurement_wins_over_it(tmp_path):
    shipped = tmp_path / "shipped.json"
    row = {"cpu": AMX.key, "precision": "fp32", "speedup": 1.1, "macro_f1_bf16": 0.5, "macro_f1_fp32": 0.6,
           "issues": 400, "noise": 0.048, "steps": 48, "measured": "2026-12-06T06:00:00Z"}
    shipped.write_text(json.dumps({AMX.key: row}))
    verdicts = Verdicts(tmp_path / "models" / "precision-verdicts.json", shipped=shipped)
    trained, runs = trained_on(AMX, verdicts)
    assert runs == ["fp32"] and trained.precision_verdict["source"] == "shipped with Issue Sorter"
    assert not verdicts.path.exists()  # nothing measured, nothing written
    verdicts.record(Verdict(**(row | {"precision": "bf16"})))  # `issue-sorter measure-precision` here
    trained, runs = trained_on(AMX, verdicts)
    assert runs == ["bf16"] and trained.precision_verdict["source"] == "measured here"


def test_the_shipped_verdicts_are_each_a_measured_bf16_cpu_kind():
    shipped = json.loads(SHIPPED_VERDICTS.read_text())
    assert shipped, "at least the CPU kind the project is developed on"
    for key, row in shipped.items():
        verdict = Verdict(**row)
        assert verdict.cpu == key and verdict.precision in ("bf16", "fp32") and verdict.issues > 0
        assert "amx_bf16" in key or "avx512_bf16" in key  # only CPUs with bf16 instructions need one


def test_without_bf16_instructions_fp32_trains_once_and_nothing_is_measured(verdicts):
    trained, runs = trained_on(AVX2, verdicts)
    assert runs == ["fp32"] and not verdicts.path.exists()
    assert trained.precision_verdict == {"kept": "fp32",
                                         "reason": "this CPU has no bf16 instructions (AMX or AVX-512 BF16): fp32"}


@pytest.mark.parametrize("kind", [AMX, AVX2])
def test_on_a_gpu_one_training_runs_whatever_the_cpu(verdicts, kind):
    trained, runs = trained_on(kind, verdicts, config=TrainConfig(device="cuda"))
    assert runs == ["fp32"] and "trained on cuda" in trained.precision_verdict["reason"]


@pytest.mark.parametrize("asked", ["fp32", "bf16"])
def test_a_precision_asked_for_trains_once_whatever_the_cpu_or_verdict(verdicts, asked):
    trained, runs = trained_on(AVX2 if asked == "bf16" else AMX, verdicts, config=TrainConfig(precision=asked))
    assert runs == [asked] and trained.precision == asked and not verdicts.path.exists()


def test_too_few_issues_to_measure_on_train_fp32_and_keep_nothing(verdicts):
    trained, runs = trained_on(AMX, verdicts, examples=LEARNT[:50])
    assert runs == ["fp32"] and not verdicts.path.exists()
    assert "too few issues to measure one on" in trained.precision_verdict["reason"]
    _, runs = trained_on(AMX, Verdicts(None, shipped=verdicts.shipped))  # nowhere to keep a verdict
    assert runs == ["fp32"]


@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "precision-verdicts.json is not a precision verdicts file"),
    ('["bf16"]', "precision-verdicts.json is not a precision verdicts file"),
    (json.dumps({AMX.key: {"precision": "bf16"}}), "the verdict for GenuineIntel avx512f .* is incomplete"),
])
def test_a_verdicts_file_that_cannot_be_read_is_named_and_left_as_it_was(verdicts, text, says):
    verdicts.path.parent.mkdir(parents=True)
    verdicts.path.write_text(text)
    with pytest.raises(ValueError, match=says):
        trained_on(AMX, verdicts)
    assert verdicts.path.read_text() == text


@pytest.mark.parametrize(("bf16", "fp32", "issues", "holds"), [
    (0.80, 0.80, 45, True), (0.76, 0.80, 1500, False), (0.785, 0.80, 1500, True), (0.65, 0.80, 45, False),
    (0.81, 0.80, 10, True),
])
def test_noise_shrinks_with_the_number_of_held_out_issues(bf16, fp32, issues, holds):
    assert bf16_holds(bf16, fp32, issues) is holds
    assert noise(0.8, 1500) < noise(0.8, 300) < noise(0.8, 45)


def test_a_bf16_training_runs_and_its_card_says_so(tiny_bert_dir, small_train, tmp_path):
    config = TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3)
    trained = fine_tune(config, small_train, progress=False, precision="bf16")
    assert trained.precision == "bf16" and trained.steps == 4
    assert all(loss == loss for loss in trained.losses)  # no NaN: bf16 keeps fp32's range
    trained.precision_verdict = {"kept": "bf16", "source": "measured here"}
    card = read_card(trained.save(tmp_path / "m", version="v1"))
    assert card["training"]["precision"] == "bf16" and card["training"]["precision_verdict"]["kept"] == "bf16"
    assert card["train_config"]["precision"] == "auto"  # the recipe: a retraining reads the verdict where it runs
    plain = fine_tune(dataclasses.replace(config, precision="auto"), small_train, progress=False)
    assert plain.precision == "fp32"  # auto's bf16 is only ever the verdict's


def weights(trained: TrainedModel):
    return {name: tensor.clone() for name, tensor in trained.model.state_dict().items()}


def same_weights(a, b) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def test_the_verdicts_training_is_a_plain_training_in_its_precision_measured_or_not(
        tiny_bert_dir, small_train, verdicts, tmp_path):
    """Real trainings of a tiny model; only the scores are chosen, so that bf16 loses quality."""
    config = TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3)
    reference = weights(fine_tune(config, small_train, progress=False, precision="fp32"))

    def bf16_loses(trained, held_out):
        return {"bf16": 0.40, "fp32": 0.80}[trained.precision]

    choice = PrecisionChoice(verdicts, AMX, MeasureOptions(steps=1, held_out=10, min_issues=0))
    kept = fine_tune_for_cpu(config, small_train, None, choice=choice, progress=False, score=bf16_loses)
    assert kept.precision == "fp32" and same_weights(weights(kept), reference)
    card = read_card(kept.save(tmp_path / "m", version="v1"))
    assert card["training"]["precision"] == "fp32"
    assert card["training"]["precision_verdict"]["macro_f1_bf16"] == 0.4

    def within_noise(trained, held_out):
        return {"bf16": 0.79, "fp32": 0.80}[trained.precision]

    elsewhere = dataclasses.replace(choice, verdicts=Verdicts.under(tmp_path / "elsewhere"))
    kept = fine_tune_for_cpu(config, small_train, None, choice=elsewhere, progress=False, score=within_noise)
    plain_bf16 = weights(fine_tune(config, small_train, progress=False, precision="bf16"))
    assert kept.precision == "bf16" and same_weights(weights(kept), plain_bf16)  # the measurement left no trace


@pytest.mark.slow  # fine-tunes (a tiny model) five times
def test_a_second_bootstrap_reads_the_verdict_the_first_measured_and_trains_once(
        tiny_bert_dir, small_train, small_heldout, registry, caplog):
    """Two registrations through trainer.pipeline (as bootstrap-model and every retraining make them) on an
    injected CPU with AMX, counting the fine-tunings: the first measures and trains, the second only trains."""
    from tests.trainer.conftest import NO_FAST_PATH
    from trainer.pipeline import train_and_register

    config = TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3,
                         tfidf_share=0.5)
    verdicts = Verdicts(registry.model_dir / "precision-verdicts.json",  # none shipped for AMX's kind here
                        shipped=registry.model_dir / "none-shipped.json")
    choice = PrecisionChoice(verdicts, AMX, MeasureOptions(steps=1, held_out=10, min_issues=0))

    def fine_tunings() -> list[str]:
        return [line.split("(")[-1].rstrip(")") for line in caplog.text.splitlines() if "fine-tuned " in line]

    with caplog.at_level(logging.INFO, logger="trainer.train"):
        first = train_and_register(registry, config, small_train, held_out=small_heldout, evaluate=True,
                                   fast_path=NO_FAST_PATH, precision=choice)
    assert fine_tunings() == ["bf16", "fp32", "bf16" if first.trained.encoder.precision == "bf16" else "fp32"]
    assert (registry.model_dir / "precision-verdicts.json").is_file()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="trainer.train"):
        second = train_and_register(registry, config, small_train, held_out=small_heldout, evaluate=True,
                                    fast_path=NO_FAST_PATH, precision=choice)
    assert fine_tunings() == [first.trained.encoder.precision]
    for directory in (second.model.directory, second.model.directory / "encoder"):  # the blend's card, its encoder's
        verdict = read_card(directory)["training"]["precision_verdict"]
        assert verdict["source"] == "measured here" and verdict["cpu"] == AMX.key
