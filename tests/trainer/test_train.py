"""Fine-tuning: the real from_pretrained path (local directories), determinism, save → load round trip."""

import dataclasses
import json

import pytest
import torch

from core.card import MODEL_CARD
from core.classifier import load_classifier
from core.encoder import TransformerClassifier
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.train import adamw, class_weights, fine_tune, length_buckets, linear_schedule


def _logits(trained, texts):
    encoded = trained.tokenizer(texts, truncation=True, max_length=32, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return trained.model(**encoded).logits


@pytest.fixture(scope="module")
def tiny_bert_config(tiny_bert_dir):
    return TrainConfig(base_model=str(tiny_bert_dir), max_length=32, epochs=1, batch_size=8, lr=1e-3)


def test_same_seed_gives_identical_logits_and_another_seed_does_not(tiny_bert_config, small_train,
                                                                     small_heldout):
    texts = [e.text for e in small_heldout[:6]]
    first = fine_tune(tiny_bert_config, small_train, progress=False)
    second = fine_tune(tiny_bert_config, small_train, progress=False)
    other = fine_tune(dataclasses.replace(tiny_bert_config, seed=7), small_train, progress=False)
    assert first.losses == second.losses
    assert torch.equal(_logits(first, texts), _logits(second, texts))
    assert not torch.allclose(_logits(first, texts), _logits(other, texts))


def test_a_local_directory_gets_a_head_with_our_label_map(tiny_bert_config, small_train):
    trained = fine_tune(tiny_bert_config, small_train, labels=["question", "feature", "bug"], progress=False)
    assert trained.labels == ["question", "feature", "bug"]
    assert trained.model.config.id2label == {0: "question", 1: "feature", 2: "bug"}
    assert trained.steps == 4 and len(trained.losses) == 4  # 30 examples, batches of 8, one epoch


def test_balanced_weights_count_each_kind_alike_whatever_its_size():
    # 6 bugs, 2 questions, no docs: each present kind's weights sum to the same share of the loss
    weights = class_weights([0] * 6 + [1] * 2, 3)
    assert weights == pytest.approx([8 / (2 * 6), 8 / (2 * 2), 0.0])
    assert 6 * weights[0] == pytest.approx(2 * weights[1])
    with pytest.raises(ValueError, match="class_weight must be one of"):
        TrainConfig(class_weight="inverse")


def test_a_balanced_loss_says_the_rare_kind_more_often(tiny_bert_config, small_train, small_heldout):
    # bugs outnumber questions 10 to 1: the plain loss learns that prior, the balanced loss does not
    bugs = [e for e in small_train if e.label == "bug"]
    questions = [e for e in small_train if e.label == "question"][:2]
    skewed = (bugs * 4)[:20] + questions
    config = dataclasses.replace(tiny_bert_config, epochs=6, batch_size=4)
    texts = [e.text for e in small_heldout]
    plain = fine_tune(config, skewed, labels=["bug", "question"], progress=False)
    balanced = fine_tune(dataclasses.replace(config, class_weight="balanced"), skewed,
                         labels=["bug", "question"], progress=False)
    assert plain.config.class_weight == "none" and balanced.config.to_dict()["class_weight"] == "balanced"
    share = [torch.softmax(_logits(model, texts), -1)[:, 1].mean().item() for model in (plain, balanced)]
    assert share[1] > share[0] + 0.05


def test_max_steps_stops_early(tiny_bert_config, small_train):
    config = dataclasses.replace(tiny_bert_config, max_steps=2, epochs=3)
    trained = fine_tune(config, small_train, progress=False)
    assert trained.steps == 2


def test_bad_label_sets_fail_before_loading_anything(small_train):
    config = TrainConfig(base_model="/nonexistent/model")
    with pytest.raises(ValueError, match=r"labels \['bug', 'feature', 'question'\] outside"):
        fine_tune(config, small_train, labels=["docs", "other"])
    with pytest.raises(ValueError, match="at least two labels"):
        fine_tune(config, [Example("a", "", "bug"), Example("b", "", "bug")])


def test_save_then_load_classifier_round_trip(trained_minilm, small_heldout, tmp_path):
    directory = trained_minilm.save(tmp_path / "m", version="v-test", metrics={"macro_f1": 0.5},
                                    thresholds={"bug": 0.7}, data_fingerprint="abc")
    loaded = load_classifier(directory)
    assert isinstance(loaded, TransformerClassifier)
    assert (loaded.version, loaded.labels) == ("v-test", ["bug", "feature", "question"])
    assert loaded.model.config.id2label == trained_minilm.model.config.id2label
    assert (directory / "model.safetensors").is_file()
    texts = [e.text for e in small_heldout[:5]]
    for before, after in zip(trained_minilm.classifier().predict(texts), loaded.predict(texts), strict=True):
        assert before.keys() == after.keys()
        assert all(abs(before[k] - after[k]) < 1e-5 for k in before)
    card = json.loads((directory / MODEL_CARD).read_text())
    assert card["kind"] == "transformer" and card["max_length"] == 32 and card["thresholds"] == {"bug": 0.7}
    assert TrainConfig.from_dict(card["train_config"]) == trained_minilm.config
    assert card["data_fingerprint"] == "abc" and card["metrics"] == {"macro_f1": 0.5} and card["created_at"]
    assert card["training"]["steps"] == trained_minilm.steps
    # where it trained: "auto" in train_config names no device
    assert card["training"]["device"] == trained_minilm.config.resolved_device()


def test_length_buckets_cover_every_example_once_in_similar_lengths():
    lengths = [(i * 37) % 100 for i in range(100)]
    batches = length_buckets(lengths, 8, torch.Generator().manual_seed(1))
    assert sorted(i for batch in batches for i in batch) == list(range(100))
    assert all(len(batch) <= 8 for batch in batches)
    assert all(lengths[a] <= lengths[b] for batch in batches for a, b in zip(batch, batch[1:], strict=False))
    assert batches == length_buckets(lengths, 8, torch.Generator().manual_seed(1))
    assert batches != length_buckets(lengths, 8, torch.Generator().manual_seed(2))


def test_the_optimizer_takes_adamws_step_in_the_fused_kernel_on_cpu():
    """The fused kernel is the plain AdamW update (the recipe's lr and weight decay) to float rounding."""
    config = TrainConfig(base_model="unused", lr=3e-2, weight_decay=0.1)
    torch.manual_seed(0)
    ours, plain = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    plain.load_state_dict(ours.state_dict())
    optimizer = adamw(ours, config, "cpu")
    reference = torch.optim.AdamW(plain.parameters(), lr=3e-2, weight_decay=0.1)
    start = ours.weight.detach().clone()
    for _ in range(3):
        batch = torch.randn(5, 8)
        for model, step in ((ours, optimizer), (plain, reference)):
            step.zero_grad()
            model(batch).pow(2).sum().backward()
            step.step()

    assert optimizer.defaults["fused"] is True
    assert not torch.allclose(ours.weight, start)  # it moved
    for mine, theirs in zip(ours.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-7)


def test_schedule_warms_up_then_decays_linearly():
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([parameter], lr=1.0)
    schedule = linear_schedule(optimizer, total_steps=20, warmup_ratio=0.1)
    rates = []
    for _ in range(20):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[:3] == pytest.approx([0.5, 1.0, 18 / 18])
    assert rates[2:] == sorted(rates[2:], reverse=True)
    assert rates[-1] == pytest.approx(1 / 18)


def test_in_memory_a_model_cuts_long_issues_as_its_saved_copy_does(trained_minilm, tmp_path):
    """Metrics measured before saving (the CLI's, select's folds) must score the text the App will serve."""
    recipe = dataclasses.replace(trained_minilm.config, truncation="head+tail")
    head_and_tail = dataclasses.replace(trained_minilm, config=recipe)
    text = "crash on startup " + "filler words " * 100 + "expected it to work"
    in_memory = head_and_tail.classifier().predict([text])[0]
    saved = load_classifier(head_and_tail.save(tmp_path / "m", version="m")).predict([text])[0]
    assert in_memory == pytest.approx(saved, abs=1e-5)
    assert trained_minilm.classifier().predict([text])[0] != pytest.approx(in_memory, abs=1e-5)
