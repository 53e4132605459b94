"""Training precision: bf16 autocast only where the CPU has bf16 instructions, and kept only if it trains as well as fp32
on the registration's held-out issues (the gate); the card says which."""

import dataclasses
import logging

import pytest

from core.card import read_card
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.precision import bf16_holds, fine_tune_gated, noise, precision_for
from trainer.train import TrainedModel, fine_tune

AMX = frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
ZEN4 = frozenset({"avx512f", "avx512_vnni", "avx512_bf16"})  # bf16 instructions, no AMX
AVX2 = frozenset({"avx2", "fma"})
HELD_OUT = [Example("t", "b", "bug")] * 300


class FakeTraining:
    """Records each training run's precision; scores each precision as given."""

    def __init__(self, f1: dict[str, float]):
        self.f1, self.runs = f1, []

    def train(self, config, examples, labels, *, progress, precision):
        self.runs.append(precision)
        return TrainedModel(model=None, tokenizer=None, labels=["bug", "feature"], config=config, base_model="b",
                            seconds={"bf16": 60.0, "fp32": 80.0}[precision], precision=precision)

    def score(self, trained, held_out):
        return self.f1[trained.precision]


def gated(training: FakeTraining, flags, config=TrainConfig(), held_out=HELD_OUT) -> TrainedModel:
    return fine_tune_gated(config, [], None, held_out, flags=flags, progress=False, train=training.train,
                           score=training.score)


def test_auto_is_bf16_only_where_the_cpu_has_bf16_instructions():
    assert precision_for(TrainConfig(), AMX) == "bf16"
    assert precision_for(TrainConfig(), ZEN4) == "bf16"  # AVX-512 BF16 alone: measured 2.0x fp32 here
    assert precision_for(TrainConfig(), AVX2) == "fp32"
    assert precision_for(TrainConfig(precision="fp32"), AMX) == "fp32"
    assert precision_for(TrainConfig(precision="bf16"), AVX2) == "bf16"  # the operator's choice


def test_without_bf16_instructions_only_fp32_is_trained():
    training = FakeTraining({"fp32": 0.8})
    trained = gated(training, AVX2)
    assert training.runs == ["fp32"] and trained.precision == "fp32" and trained.precision_gate is None


def test_with_amx_a_bf16_model_within_noise_of_fp32_is_kept():
    training = FakeTraining({"bf16": 0.79, "fp32": 0.80})  # 1 point on 300 issues: noise (4.5 points)
    trained = gated(training, AMX)
    assert training.runs == ["bf16", "fp32"] and trained.precision == "bf16"
    assert trained.precision_gate == {"kept": "bf16", "passed": True, "issues": 300, "macro_f1_bf16": 0.79,
                                      "macro_f1_fp32": 0.8, "noise": 0.0453, "seconds_bf16": 60.0,
                                      "seconds_fp32": 80.0}


def test_with_amx_a_bf16_model_that_lost_quality_gives_way_to_fp32(caplog):
    training = FakeTraining({"bf16": 0.70, "fp32": 0.80})
    with caplog.at_level(logging.WARNING, logger="trainer.precision"):
        trained = gated(training, AMX)
    assert trained.precision == "fp32" and trained.precision_gate["passed"] is False
    assert trained.precision_gate["kept"] == "fp32"
    assert "bf16 training lost quality: macro-F1 0.7000 against fp32's 0.8000 on 300 held-out issues" in caplog.text


def test_without_held_out_issues_bf16_cannot_be_checked_so_fp32_trains():
    training = FakeTraining({"fp32": 0.8})
    trained = gated(training, AMX, held_out=[])
    assert training.runs == ["fp32"] and trained.precision_gate["kept"] == "fp32"


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
    trained.precision_gate = {"kept": "bf16", "passed": True}
    card = read_card(trained.save(tmp_path / "m", version="v1"))
    assert card["training"]["precision"] == "bf16" and card["training"]["precision_gate"]["passed"] is True
    assert card["train_config"]["precision"] == "auto"  # the recipe: a retraining decides again where it runs
    plain = fine_tune(dataclasses.replace(config, precision="auto"), small_train, progress=False)
    assert plain.precision == "fp32"  # auto's bf16 is only ever the gate's
