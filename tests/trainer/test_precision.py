"""Training precision: bf16 autocast only where the CPU has bf16 instructions, and kept only if it trains as well as fp32
on the registration's held-out issues (the gate); the card says which."""

import dataclasses
import json
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
LEARNT = [Example("t", "b", "bug"), Example("t", "b", "feature")]  # what the fake trainings learn from


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
    return fine_tune_gated(config, LEARNT, None, held_out, flags=flags, progress=False, train=training.train,
                           score=training.score)


def test_auto_is_bf16_only_where_the_cpu_has_bf16_instructions():
    assert precision_for(TrainConfig(), AMX) == "bf16"
    assert precision_for(TrainConfig(), ZEN4) == "bf16"  # AVX-512 BF16 alone: measured 2.0x fp32 here
    assert precision_for(TrainConfig(), AVX2) == "fp32"
    assert precision_for(TrainConfig(precision="fp32"), AMX) == "fp32"
    assert precision_for(TrainConfig(precision="bf16"), AVX2) == "bf16"  # the operator's choice


def test_without_bf16_instructions_only_fp32_is_trained_and_the_verdict_says_why():
    training = FakeTraining({"fp32": 0.8})
    trained = gated(training, AVX2)
    assert training.runs == ["fp32"] and trained.precision == "fp32"
    assert trained.precision_gate == {"kept": "fp32", "reason": "this CPU has no bf16 instructions (AMX or "
                                      "AVX-512 BF16): fp32 trained alone, no gate"}


@pytest.mark.parametrize("flags", [AMX, AVX2])
def test_on_a_gpu_one_training_runs_whatever_the_cpu_and_the_verdict_names_the_gpu(flags):
    training = FakeTraining({"fp32": 0.8})  # float16 autocast on CUDA: no CPU bf16 to compare it with
    trained = gated(training, flags, TrainConfig(device="cuda"))
    assert training.runs == ["fp32"] and trained.precision == "fp32"
    assert trained.precision_gate == {"kept": "fp32",
                                      "reason": "trained on cuda (float16 autocast there): no CPU bf16 to gate"}


def test_with_amx_a_bf16_model_within_noise_of_fp32_is_kept():
    training = FakeTraining({"bf16": 0.79, "fp32": 0.80})  # 1 point on 300 issues: noise (4.5 points)
    trained = gated(training, AMX)
    assert training.runs == ["bf16", "fp32"] and trained.precision == "bf16"
    assert trained.precision_gate == {"kept": "bf16", "passed": True, "issues": 300, "macro_f1_bf16": 0.79,
                                      "macro_f1_fp32": 0.8, "noise": 0.0453, "seconds_bf16": 60.0,
                                      "seconds_fp32": 80.0, "seconds_both": 140.0}  # the gate's whole cost


def test_with_amx_a_bf16_model_that_lost_quality_gives_way_to_fp32(caplog):
    training = FakeTraining({"bf16": 0.70, "fp32": 0.80})
    with caplog.at_level(logging.WARNING, logger="trainer.precision"):
        trained = gated(training, AMX)
    assert trained.precision == "fp32" and trained.precision_gate["passed"] is False
    assert trained.precision_gate["kept"] == "fp32"
    assert "bf16 training lost quality: macro-F1 0.7000 against fp32's 0.8000 on 300 held-out issues" in caplog.text
    assert "The gate trained both precisions: 140 s in all (bf16 60 s, fp32 80 s)" in caplog.text


def test_on_zen4_bf16_is_gated_as_with_amx():
    training = FakeTraining({"bf16": 0.80, "fp32": 0.80})
    assert gated(training, ZEN4).precision == "bf16" and training.runs == ["bf16", "fp32"]


def test_without_held_out_issues_bf16_cannot_be_checked_so_fp32_trains():
    training = FakeTraining({"fp32": 0.8})
    trained = gated(training, AMX, held_out=[])
    assert training.runs == ["fp32"] and trained.precision_gate == {
        "kept": "fp32", "reason": "no held-out issues to check bf16 on: fp32 trained alone"}


def test_held_out_issues_of_kinds_it_does_not_learn_are_not_counted():
    training = FakeTraining({"bf16": 0.8, "fp32": 0.8})
    held_out = [Example("t", "b", "bug")] * 40 + [Example("t", "b", "docs")] * 60
    trained = fine_tune_gated(TrainConfig(), LEARNT, None, held_out, flags=AMX, progress=False,
                              train=training.train, score=training.score)
    assert trained.precision_gate["issues"] == 40
    only_docs = FakeTraining({"fp32": 0.8})
    assert fine_tune_gated(TrainConfig(), LEARNT, None, held_out[40:], flags=AMX, progress=False,
                           train=only_docs.train, score=only_docs.score).precision == "fp32"
    assert only_docs.runs == ["fp32"]


@pytest.mark.parametrize("asked", ["fp32", "bf16"])
def test_a_precision_asked_for_trains_alone_whatever_the_cpu(asked):
    training = FakeTraining({})
    trained = gated(training, AVX2 if asked == "bf16" else AMX, config=TrainConfig(precision=asked))
    assert training.runs == [asked] and trained.precision == asked
    assert trained.precision_gate == {"kept": asked, "reason": f"precision {asked} was asked for "
                                      "(TrainConfig.precision): trained alone, not gated"}


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


def weights(trained: TrainedModel):
    return {name: tensor.clone() for name, tensor in trained.model.state_dict().items()}


def same_weights(a, b) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def test_a_bf16_model_the_gate_refused_is_replaced_by_the_fp32_training_which_is_what_serves(
        tiny_bert_dir, small_train, small_heldout, tmp_path):
    """Real trainings of a tiny model; only the scores are chosen, so that bf16 loses quality."""
    config = TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3)
    reference = {precision: weights(fine_tune(config, small_train, progress=False, precision=precision))
                 for precision in ("bf16", "fp32")}
    assert not same_weights(reference["bf16"], reference["fp32"])  # bf16 autocast does train differently

    def bf16_loses(trained, held_out):
        return {"bf16": 0.40, "fp32": 0.80}[trained.precision]

    kept = fine_tune_gated(config, small_train, None, small_heldout, flags=AMX, progress=False, score=bf16_loses)
    assert kept.precision == "fp32" and same_weights(weights(kept), reference["fp32"])
    card = read_card(kept.save(tmp_path / "m", version="v1"))
    assert card["training"]["precision"] == "fp32"
    assert card["training"]["precision_gate"]["passed"] is False
    assert card["training"]["precision_gate"]["issues"] == len(small_heldout)

    def within_noise(trained, held_out):
        return {"bf16": 0.79, "fp32": 0.80}[trained.precision]

    kept = fine_tune_gated(config, small_train, None, small_heldout, flags=AMX, progress=False, score=within_noise)
    assert kept.precision == "bf16" and same_weights(weights(kept), reference["bf16"])


def test_bootstrap_and_retraining_train_through_the_gate_and_the_blends_card_records_it(
        tiny_bert_dir, small_train, small_heldout, tmp_path, caplog):
    """trainer.blend.train_model, which trainer.pipeline calls for every registration, on injected CPUs."""
    from trainer.blend import TrainedBlend, train_model

    config = TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3,
                         tfidf_share=0.5)
    with caplog.at_level(logging.INFO, logger="trainer.train"):
        on_avx2 = train_model(config, small_train, progress=False, held_out=small_heldout, cpu_flags=AVX2)
    assert isinstance(on_avx2, TrainedBlend) and on_avx2.encoder.precision == "fp32"
    assert caplog.text.count("fine-tuned ") == 1  # fp32 alone: no second training on this CPU
    card = read_card(on_avx2.save(tmp_path / "avx2", version="v1"))
    assert card["training"]["precision"] == "fp32"
    assert "no bf16 instructions" in card["training"]["precision_gate"]["reason"]

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="trainer.train"):
        on_amx = train_model(config, small_train, progress=False, held_out=small_heldout, cpu_flags=AMX)
    assert [line.split("(")[-1] for line in caplog.text.splitlines() if "fine-tuned " in line] == ["bf16)", "fp32)"]
    gate = on_amx.encoder.precision_gate
    assert gate["kept"] == on_amx.encoder.precision == ("bf16" if gate["passed"] else "fp32")
    assert gate["passed"] is bf16_holds(gate["macro_f1_bf16"], gate["macro_f1_fp32"], gate["issues"])
    assert gate["seconds_both"] == pytest.approx(gate["seconds_bf16"] + gate["seconds_fp32"], abs=0.15)
    saved = on_amx.save(tmp_path / "amx", version="v2")
    for directory in (saved, saved / "encoder"):  # the blend's card, and its encoder's
        card = read_card(directory)
        assert card["training"]["precision"] == gate["kept"] and card["training"]["precision_gate"] == gate


def registered_base(directory, training: dict, version="global-base"):
    """A registered encoder's directory as a retraining continues from: only its card matters here."""
    directory.mkdir()
    (directory / "issue_sorter.json").write_text(json.dumps({"version": version, "training": training}))
    return str(directory)


PASSED_THERE = {"precision": "bf16", "precision_gate": {"kept": "bf16", "passed": True, "issues": 1500,
                                                        "macro_f1_bf16": 0.5323, "macro_f1_fp32": 0.5318}}


def test_a_retraining_whose_base_model_passed_the_bf16_gate_trains_bf16_alone_and_says_whose_pass(tmp_path):
    training = FakeTraining({})
    config = TrainConfig(base_model=registered_base(tmp_path / "base", PASSED_THERE))
    trained = gated(training, ZEN4, config=config)
    assert training.runs == ["bf16"] and trained.precision == "bf16"
    inherited = {"passed_at": "global-base", "issues": 1500, "macro_f1_bf16": 0.5323, "macro_f1_fp32": 0.5318}
    assert trained.precision_gate == {"kept": "bf16", "inherited": inherited, "reason": "its base model's bf16 "
                                      "training passed its gate (global-base): bf16 trained alone"}
    # the next retraining, from that one, inherits the same pass: the gate that ran, not the one that did not
    again = gated(FakeTraining({}), ZEN4, config=TrainConfig(base_model=registered_base(
        tmp_path / "next", {"precision": "bf16", "precision_gate": trained.precision_gate}, version="v2")))
    assert again.precision_gate["inherited"] == inherited


@pytest.mark.parametrize("training", [
    {"precision": "fp32", "precision_gate": {"kept": "fp32", "passed": False, "issues": 1500}},  # bf16 refused
    {"precision": "fp32", "precision_gate": {"kept": "fp32", "reason": "this CPU has no bf16 instructions"}},
    {"seconds": 12.0},  # a card from before the gate
])
def test_a_retraining_from_a_base_without_a_bf16_pass_runs_the_gate(tmp_path, training):
    runs = FakeTraining({"bf16": 0.8, "fp32": 0.8})
    gated(runs, ZEN4, config=TrainConfig(base_model=registered_base(tmp_path / "base", training)))
    assert runs.runs == ["bf16", "fp32"]


def test_an_inherited_pass_does_not_make_bf16_train_where_the_cpu_has_no_bf16(tmp_path):
    runs = FakeTraining({})
    trained = gated(runs, AVX2, config=TrainConfig(base_model=registered_base(tmp_path / "base", PASSED_THERE)))
    assert runs.runs == ["fp32"] and trained.precision == "fp32"


def test_a_retraining_from_a_registered_blend_trains_once_and_its_card_records_the_inherited_pass(
        tiny_bert_dir, small_train, small_heldout, tmp_path, caplog):
    """Real trainings: the base is a saved blend whose encoder's card says bf16 passed (written here)."""
    from core.card import update_card
    from trainer.blend import train_model

    config = TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3,
                         tfidf_share=0.5)
    base = train_model(config, small_train, progress=False, held_out=small_heldout, cpu_flags=AVX2)
    encoder = base.save(tmp_path / "base", version="global-base") / "encoder"
    update_card(encoder, training=PASSED_THERE)
    with caplog.at_level(logging.INFO, logger="trainer.train"):
        retrained = train_model(dataclasses.replace(config, base_model=str(encoder)), small_train, progress=False,
                                held_out=small_heldout, cpu_flags=ZEN4)
    assert [line.split("(")[-1] for line in caplog.text.splitlines() if "fine-tuned " in line] == ["bf16)"]
    card = read_card(retrained.save(tmp_path / "retrained", version="global-next"))
    assert card["training"]["precision"] == "bf16"
    assert card["training"]["precision_gate"]["inherited"]["passed_at"] == "global-base-encoder"  # its card
