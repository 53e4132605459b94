"""The registry: versioned directories under MODEL_DIR, rows, promotion, rollback and loading."""

import json
import shutil

import pytest

from core.card import MODEL_CARD
from core.classifier import TransformerClassifier
from core.tables import ModelPromotion, ModelVersion
from trainer.registry import Registry, RegistryError


def _card(directory):
    return json.loads((directory / MODEL_CARD).read_text())


def test_register_saves_under_model_dir_and_writes_the_row(registry, model_dir, tfidf_model, session):
    row = registry.register(tfidf_model, metrics={"macro_f1": 0.7}, thresholds={"bug": 0.8},
                            data_fingerprint="f")
    assert row.version.startswith("global-")
    assert (model_dir / row.version).is_dir() and row.path == str((model_dir / row.version).resolve())
    assert _card(model_dir / row.version)["version"] == row.version  # what ServingModels compares
    stored = session.get(ModelVersion, row.id)
    assert (stored.scope, stored.base_model) == ("global", "tfidf-logreg")
    assert stored.labels == ["bug", "feature", "question"]
    assert (stored.metrics, stored.data_fingerprint) == ({"macro_f1": 0.7}, "f")


def test_versions_are_unique_and_readable(registry, tfidf_model):
    first = registry.register(tfidf_model, scope="octo/Hello-World")
    second = registry.register(tfidf_model, scope="octo/Hello-World")
    assert first.version.startswith("octo-hello-world-") and second.version.startswith("octo-hello-world-")
    assert first.version != second.version
    assert [row.version for row in registry.list()] == [first.version, second.version]
    assert registry.list(scope="global") == []


def test_a_saved_directory_elsewhere_is_copied_in_and_renamed(registry, model_dir, tfidf_model, tmp_path):
    source = tfidf_model.save(tmp_path / "elsewhere", version="draft")
    row = registry.register(source, metrics={"macro_f1": 0.6})
    assert row.version != "draft" and (model_dir / row.version / "pipeline.joblib").is_file()
    assert _card(model_dir / row.version)["version"] == row.version
    assert _card(model_dir / row.version)["metrics"] == {"macro_f1": 0.6}
    assert _card(source)["version"] == "draft"  # the source is left as it was
    shutil.rmtree(source)
    assert registry.load(row.version).version == row.version


def test_an_unregistered_directory_inside_model_dir_is_adopted_in_place(registry, model_dir, tfidf_model):
    tfidf_model.save(model_dir / "hand-made-1", version="whatever")
    row = registry.register(model_dir / "hand-made-1")
    assert row.version == "hand-made-1" and _card(model_dir / "hand-made-1")["version"] == "hand-made-1"


def test_a_directory_without_a_card_names_the_fix(registry, tmp_path):
    (tmp_path / "weights").mkdir()
    with pytest.raises(FileNotFoundError, match="trainer.train.save"):
        registry.register(tmp_path / "weights")


def test_promote_and_serving(registry, tfidf_model, session):
    a, b = registry.register(tfidf_model), registry.register(tfidf_model)
    assert registry.serving() is None
    registry.promote(a.version, "first")
    registry.promote(b.version, "better")
    assert registry.serving().version == b.version
    assert registry.serving("octo/repo") is None  # scopes are separate
    promotions = session.query(ModelPromotion).order_by(ModelPromotion.id)
    assert [p.reason for p in promotions] == ["first", "better"]


def test_rollback_walks_back_through_what_served(registry, tfidf_model):
    a, b, c = (registry.register(tfidf_model) for _ in range(3))
    for row in (a, b, c):
        registry.promote(row.version)
    assert registry.rollback().model_version.version == b.version
    assert registry.serving().version == b.version
    assert registry.rollback().reason == f"rollback from {b.version}"
    assert registry.serving().version == a.version
    with pytest.raises(RegistryError, match="nothing to roll back to"):
        registry.rollback()


def test_rollback_with_nothing_promoted_names_the_fix(registry):
    with pytest.raises(RegistryError, match="run `issue-sorter bootstrap-model`"):
        registry.rollback()


def test_load_errors_name_the_fix(registry):
    with pytest.raises(RegistryError, match="no model is promoted.*issue-sorter bootstrap-model"):
        registry.load()
    with pytest.raises(RegistryError, match="unknown model version 'nope'.*issue-sorter models"):
        registry.load("nope")
    with pytest.raises(RegistryError, match="unknown model version"):
        registry.promote("nope")


def test_a_fine_tuned_model_round_trips_through_the_registry(registry, trained_minilm):
    row = registry.register(trained_minilm)
    registry.promote(row.version)
    loaded = registry.load()
    assert isinstance(loaded, TransformerClassifier)
    assert (loaded.version, loaded.labels) == (row.version, trained_minilm.labels)
    assert loaded.model.config.label2id == trained_minilm.model.config.label2id


def test_two_registries_on_one_database_agree(model_dir, session, tfidf_model):
    row = Registry(model_dir, session).register(tfidf_model)
    Registry(model_dir, session).promote(row.version)
    assert Registry(model_dir, session).serving().version == row.version
