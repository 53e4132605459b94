"""The registry: versioned directories under MODEL_DIR, rows, promotion, rollback and loading."""

import json
import shutil

import pytest

from core.card import MODEL_CARD, ModelCard
from core.db import make_sessionmaker
from core.encoder import TransformerClassifier
from core.tables import ModelPromotion, ModelVersion
from trainer.registry import Registry, RegistryError


def _card(directory):
    return json.loads((directory / MODEL_CARD).read_text())


def test_register_saves_under_model_dir_and_writes_the_row(registry, model_dir, tfidf_model, session):
    model = registry.register(tfidf_model, metrics={"macro_f1": 0.7}, thresholds={"bug": 0.8},
                              data_fingerprint="f")
    assert model.version.startswith("global-")
    assert model.directory == model_dir / model.version and model.row.path == str(model.directory.resolve())
    assert _card(model.directory)["version"] == model.version  # what ServingModels compares
    # the registered model comes back with the card it was saved with: nobody reads it again
    assert model.card == ModelCard.read(model.directory) and model.card.thresholds == {"bug": 0.8}
    stored = session.get(ModelVersion, model.row.id)
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
    assert row.version != "draft" and (model_dir / row.version / "tfidf.json").is_file()
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
    with pytest.raises(FileNotFoundError, match="trainer.train.TrainedModel.save"):
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


def test_a_challenger_must_beat_the_repositorys_own_model_else_the_global_one(registry, tfidf_model):
    assert registry.champion("octo/repo") is None
    shared = registry.register(tfidf_model)
    registry.promote(shared.version)
    assert registry.champion("octo/repo").version == shared.version
    own = registry.register(tfidf_model, scope="octo/repo")
    registry.promote(own.version)
    champion = registry.champion("octo/repo")
    assert champion.version == own.version and champion.card.version == own.version
    assert registry.champion().version == shared.version


def test_a_model_found_by_version_comes_with_its_card_or_says_its_directory_is_missing(registry, tfidf_model):
    registered = registry.register(tfidf_model, metrics={"macro_f1": 0.6})
    found = registry.model(registered.version)
    assert found.row is registered.row and found.card == registered.card
    shutil.rmtree(registered.directory)
    with pytest.raises(RegistryError, match="is missing: restore it"):
        registry.model(registered.version)


def test_annotating_a_model_writes_its_card_and_the_metrics_reach_its_row(registry, tfidf_model):
    model = registry.register(tfidf_model, metrics={"macro_f1": 0.6})
    annotated = registry.annotate(model, train_data={"source": "issues.csv"}, metrics={"macro_f1": 0.7})
    assert annotated.card == ModelCard.read(model.directory) and annotated.card.extra["train_data"]["source"]
    assert annotated.row.metrics == {"macro_f1": 0.7} == registry.get(model.version).metrics
    assert registry.annotate(annotated, pulled_from={"source": "x"}).row.metrics == {"macro_f1": 0.7}


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


def test_registering_only_stores_the_model_and_its_row(registry, trained_minilm):
    """Building and gating the fast path is a step of trainer.pipeline, not of the registry."""
    model = registry.register(trained_minilm)
    directory = model.directory
    assert (directory / "model.safetensors").is_file() and not (directory / "fast").exists()
    assert "fast_path" not in _card(directory)
    assert type(registry.load(model.version)) is TransformerClassifier  # PyTorch serves it, saying why


def test_a_fine_tuned_model_round_trips_through_the_registry(registry, trained_minilm):
    row = registry.register(trained_minilm)
    registry.promote(row.version)
    loaded = registry.load()
    assert isinstance(loaded, TransformerClassifier)
    assert (loaded.version, loaded.labels) == (row.version, trained_minilm.labels)
    assert loaded.model.config.label2id == trained_minilm.model.config.label2id


def test_an_opened_registry_commits_its_work_or_none_of_it(model_dir, database_url, tfidf_model):
    sessions = make_sessionmaker(database_url)
    with Registry.open(model_dir, sessions) as registry:
        kept = registry.register(tfidf_model).version
    with pytest.raises(RuntimeError), Registry.open(model_dir, sessions) as registry:
        registry.register(tfidf_model)
        raise RuntimeError("the command failed after registering")
    with Registry.open(model_dir, sessions) as registry:
        assert [row.version for row in registry.list()] == [kept]


def test_two_registries_on_one_database_agree(model_dir, session, tfidf_model):
    row = Registry(model_dir, session).register(tfidf_model)
    Registry(model_dir, session).promote(row.version)
    assert Registry(model_dir, session).serving().version == row.version


def test_garbage_collection_keeps_what_serves_what_rollback_needs_and_the_newest_challenger(
        registry, tfidf_model, model_dir, tmp_path, session):
    promoted = [registry.register(tfidf_model) for _ in range(5)]
    for row in promoted:
        registry.promote(row.version)
    challengers = [registry.register(tfidf_model) for _ in range(3)]  # never promoted
    other = registry.register(tfidf_model, scope="octo/repo")  # another scope's only version, unpromoted
    registry.promote(promoted[0].version, "serves a repository too", scope="octo/repo")
    elsewhere = registry.register(shutil.copytree(model_dir / promoted[0].version, tmp_path / "outside"),
                                  scope="elsewhere/x")
    kept_outside = tmp_path / "not-in-the-registry"
    shutil.copytree(model_dir / promoted[0].version, kept_outside)
    session.query(ModelVersion).filter_by(id=elsewhere.row.id).update({"path": str(kept_outside)})
    registry.register(tfidf_model, scope="elsewhere/x")  # newer: the one outside is no longer kept as newest

    assert registry.collect_garbage(dry_run=True) and all((model_dir / r.version).is_dir() for r in promoted)
    deleted = {row.version for row in registry.collect_garbage()}

    assert deleted == {promoted[1].version, *(c.version for c in challengers[:2])}
    assert kept_outside.is_dir()  # registered from outside model_dir: not the registry's to delete
    assert all((model_dir / v).is_dir() for v in (promoted[0].version, *(r.version for r in promoted[2:]),
                                                  challengers[2].version, other.version))
    assert registry.serving().version == promoted[4].version
    registry.rollback()
    assert registry.load().version == promoted[3].version  # both rollbacks load
    registry.rollback()
    assert registry.load().version == promoted[2].version
    # the versions rolled back from left the history: they go; the rows stay, as history
    assert {row.version for row in registry.collect_garbage()} == {promoted[3].version, promoted[4].version}
    assert len(registry.list()) == 11
    with pytest.raises(RegistryError, match="is missing"):
        registry.promote(promoted[1].version)
