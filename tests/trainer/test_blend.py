"""The encoder + TF-IDF blend: its share, its serving, its registry round trip and its retraining."""

import contextlib
import dataclasses
import functools
import json
import os
import sys
from pathlib import Path

import pytest

from core.card import MODEL_CARD, ModelCard, encoder_directory
from core.classifier import BlendedClassifier, load_classifier
from tests.trainer.conftest import NO_FAST_PATH
from tests.trainer.test_retrain import REPO, confirm
from trainer.baseline import BASE_MODEL as TFIDF_BASE_MODEL
from trainer.baseline import TrainedBaseline
from trainer.blend import TrainedBlend, train_model
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.evaluate import evaluate_classifier
from trainer.pipeline import train_and_register
from trainer.retrain import RetrainPolicy, retrain_scope


@pytest.fixture(scope="module")
def trained_blend(minilm_config, small_train):
    return train_model(dataclasses.replace(minilm_config, tfidf_share=0.6), small_train, progress=False)


def test_a_tfidf_share_outside_zero_one_is_refused_by_the_recipe():
    with pytest.raises(ValueError, match="tfidf_share"):
        TrainConfig(tfidf_share=1.0)


def test_a_tfidf_share_trains_both_models_on_the_same_issues(trained_blend, small_train):
    assert isinstance(trained_blend, TrainedBlend) and trained_blend.tfidf_share == 0.6
    assert trained_blend.labels == trained_blend.tfidf.labels == ["bug", "feature", "question"]


@pytest.mark.slow  # fine-tunes MiniLM (one step)
def test_without_a_tfidf_share_the_encoder_is_trained_alone(minilm_config, small_train):
    config = dataclasses.replace(minilm_config, max_steps=1)
    assert not isinstance(train_model(config, small_train, progress=False), TrainedBlend)


def test_a_saved_blend_loads_and_scores_as_in_memory(trained_blend, small_heldout, tmp_path):
    texts = [example.text for example in small_heldout[:8]]
    directory = trained_blend.save(tmp_path / "blend", version="v-blend")
    loaded = load_classifier(directory)
    assert isinstance(loaded, BlendedClassifier) and loaded.version == "v-blend"
    assert ModelCard.read(directory).kind == "blend" and loaded.tfidf_share == 0.6
    in_memory = trained_blend.classifier().predict(texts)
    for got, expected in zip(loaded.predict(texts), in_memory, strict=True):
        assert got == pytest.approx(expected, abs=1e-5)
    # the members are each a model of their own; retraining starts from the encoder
    assert encoder_directory(directory, ModelCard.read(directory)) == directory / "encoder"
    assert ModelCard.read(directory / "encoder").kind == "transformer"


def test_a_blends_card_says_where_its_encoder_trained(trained_blend, tmp_path):
    directory = trained_blend.save(tmp_path / "blend", version="v-blend")
    training = json.loads((directory / MODEL_CARD).read_text())["training"]
    assert training["device"] == trained_blend.encoder.config.resolved_device()
    assert training["precision"] == trained_blend.encoder.precision


_OPENED: list[list[Path]] = []  # the files opened in each `files_opened` block in progress


def _record_open(event: str, args: tuple) -> None:
    if event == "open" and _OPENED and isinstance(args[0], str | os.PathLike):
        _OPENED[-1].append(Path(args[0]))


@functools.cache
def _hook_opens() -> None:
    sys.addaudithook(_record_open)  # it stays for the process: added once, idle outside a block


@contextlib.contextmanager
def files_opened():
    """The paths this process opens inside the block, as Python's audit events report them."""
    _hook_opens()
    _OPENED.append([])
    try:
        yield _OPENED[-1]
    finally:
        _OPENED.pop()


def test_loading_a_blend_reads_each_of_its_three_cards_once(trained_blend, tmp_path):
    directory = trained_blend.save(tmp_path / "blend", version="v-blend")
    with files_opened() as opened:
        loaded = load_classifier(directory)
    cards = sorted(path.parent for path in opened if path.name == MODEL_CARD)
    assert cards == [directory, directory / "encoder", directory / "tfidf"]
    assert (loaded.card.version, loaded.encoder.card.version) == ("v-blend", "v-blend-encoder")


@pytest.mark.slow  # fine-tunes MiniLM
def test_a_served_blend_carries_the_thresholds_its_registration_measured_on_the_blends_scores(
        registry, minilm_config, small_train, small_heldout):
    """The labelling policy reads a classifier's `card.thresholds`: a blend's are measured on the blend."""
    config = dataclasses.replace(minilm_config, tfidf_share=0.6)
    model, _, metrics = train_and_register(registry, config, small_train, held_out=small_heldout, evaluate=True,
                                           fast_path=NO_FAST_PATH)
    assert metrics["thresholds"] and model.row.metrics["n_scored"] == len(small_heldout)
    served = load_classifier(model.directory)
    assert isinstance(served, BlendedClassifier) and served.card.version == model.version
    assert served.card.thresholds == metrics["thresholds"]
    assert evaluate_classifier(served, small_heldout)["thresholds"] == pytest.approx(metrics["thresholds"], abs=1e-4)


def test_the_tfidf_baseline_is_trained_by_the_same_function_as_every_other_kind(small_train):
    trained = train_model(TrainConfig(base_model=TFIDF_BASE_MODEL), small_train, progress=False)
    assert isinstance(trained, TrainedBaseline) and trained.labels == ["bug", "feature", "question"]
    with pytest.raises(ValueError, match="TF-IDF alone: it blends with no encoder"):
        train_model(TrainConfig(base_model=TFIDF_BASE_MODEL, tfidf_share=0.5), small_train, progress=False)


def test_retraining_a_blended_champion_starts_from_its_encoder_and_keeps_the_blend(
        session, registry, trained_blend, small_train):
    champion = registry.register(trained_blend)
    registry.promote(champion.version, "the global model")
    labels = {"bug": "bug", "feature": "enhancement", "question": "question"}
    confirm(session, REPO, small_train, [labels[e.label] for e in small_train])
    policy = RetrainPolicy(min_new_decisions=5, min_per_label=4, min_holdout=4, holdout_share=0.25, epochs=1,
                           max_length=32)
    result = retrain_scope(session, registry, REPO, policy=policy, trigger="manual", fast_path=NO_FAST_PATH)
    challenger = registry.get(result.message.split(":")[0])
    card = ModelCard.read(challenger.path)
    assert card.kind == "blend" and card.extra["tfidf_share"] == 0.6
    assert card.base_model == str(champion.encoder_directory)
    assert isinstance(load_classifier(challenger.path), BlendedClassifier)


def _words(tfidf_pipeline) -> set[str]:
    words = dict(tfidf_pipeline.named_steps["features"].transformer_list)["words"]
    return set(words.vocabulary_)


@pytest.mark.slow  # fine-tunes MiniLM (one step)
def test_tfidf_also_learns_from_other_issues_of_the_encoders_classes(minilm_config, small_train):
    others = [Example("zyxwvut crashes when the window opens", "stack trace below", "bug", repo="octo/other"),
              Example("zyxwvut should support dark mode", "", "feature", repo="octo/other"),
              Example("qqdocsword typo in the readme", "", "docs", repo="octo/other")]  # no such class
    config = dataclasses.replace(minilm_config, max_steps=1, tfidf_share=0.6)
    trained = train_model(config, small_train, progress=False, tfidf_also=others)
    assert "zyxwvut" in _words(trained.tfidf.pipeline) and "qqdocsword" not in _words(trained.tfidf.pipeline)
    assert trained.tfidf.labels == trained.labels == ["bug", "feature", "question"]


def test_retraining_a_repository_lets_its_tfidf_learn_from_other_repositories(
        session, registry, trained_blend, small_train):
    champion = registry.register(trained_blend)
    registry.promote(champion.version, "the global model")
    confirm(session, REPO, small_train, [e.label for e in small_train])
    other = [Example(f"zyxwvut fails to build, case {n}", "", "bug") for n in range(3)]
    confirm(session, "octo/other", other, ["bug"] * 3)
    policy = RetrainPolicy(min_new_decisions=5, min_per_label=4, min_holdout=4, holdout_share=0.25, epochs=1,
                           max_length=32)
    result = retrain_scope(session, registry, REPO, policy=policy, trigger="manual", fast_path=NO_FAST_PATH)
    path = registry.get(result.message.split(":")[0]).path
    assert "zyxwvut" in _words(load_classifier(path).tfidf.pipeline)
    card = ModelCard.read(Path(path) / "tfidf")
    assert card.extra["train_config"]["other_repositories"] == {"issues": 3, "weight": 0.3}
