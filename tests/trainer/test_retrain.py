"""Retraining from human-confirmed issues: the classes kept, the gate's two scores, what is due."""

import datetime as dt

import pytest

from core import store
from core.card import read_card
from core.encoder import SERVES
from core.tables import GLOBAL_SCOPE, ModelVersion, TrainingRun
from tests.trainer.conftest import NO_FAST_PATH
from trainer.fast_path import FastPathOptions
from trainer.gate import verdict
from trainer.retrain import (
    RetrainPolicy,
    examples_for_scope,
    other_repositories_examples,
    retrain_scope,
    scopes_due,
    split_recent,
)

POLICY = RetrainPolicy(min_new_decisions=5, min_per_label=4, min_holdout=4, holdout_share=0.25, epochs=1,
                       max_length=32)
REPO = "octo/widgets"


def confirm(session, repo: str, issues, labels):
    """Issues of `repo` whose label a maintainer confirmed, one day apart, oldest first."""
    repository = store.ensure_repository(session, repo)
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for number, (example, label) in enumerate(zip(issues, labels, strict=True), 1):
        record, _ = store.upsert_issue(session, repository, number, title=example.title, body=example.body,
                                       author_login="someone", state="open",
                                       opened_at=start + dt.timedelta(days=number))
        record.confirmed_label, record.confirmed_by = label, "maintainer"
        record.confirmed_at = start + dt.timedelta(days=number)


@pytest.fixture
def champion(registry, trained_minilm):
    model = registry.register(trained_minilm)
    registry.promote(model.version, "the global model")
    return model


def test_kind_labels_are_learnt_as_kinds_and_no_kind_of_the_champion_is_dropped(session, small_train):
    questions_and_features = [e for e in small_train if e.label != "bug"][:12]
    labels = ["question" if e.label == "question" else "enhancement" for e in questions_and_features]
    confirm(session, REPO, questions_and_features, labels)
    examples, classes = examples_for_scope(session, REPO, POLICY, kinds=["bug", "feature", "question"])
    assert {e.label for e in examples} == {"feature", "question"}
    assert classes == ["bug", "feature", "question"]  # bug stays a class before the repo has a bug
    assert [e.created_at for e in examples] == sorted(e.created_at for e in examples)


def test_a_repository_of_its_own_labels_gets_a_model_of_those_labels(session, small_train):
    issues = small_train[:12]
    confirm(session, REPO, issues, ["area: ui", "area: api"] * 6)
    examples, classes = examples_for_scope(session, REPO, POLICY, kinds=["bug", "feature", "question"])
    assert classes == ["area: api", "area: ui"] and len(examples) == 12


def test_the_most_recent_issues_judge_and_the_older_ones_teach(session, small_train):
    confirm(session, REPO, small_train[:20], [e.label for e in small_train[:20]])
    examples, _ = examples_for_scope(session, REPO, POLICY)
    train, held_out = split_recent(examples, POLICY)
    assert len(held_out) == 5 and max(e.created_at for e in train) < min(e.created_at for e in held_out)


def test_retraining_records_both_scores_and_promotes_only_a_better_model(session, registry, champion,
                                                                        small_train):
    labels = {"bug": "bug", "feature": "enhancement", "question": "question"}
    confirm(session, REPO, small_train, [labels[e.label] for e in small_train])
    result = retrain_scope(session, registry, REPO, policy=POLICY, trigger="manual", fast_path=NO_FAST_PATH)
    run = result.run
    assert run is not None and run.scope == REPO and run.champion_version_id == champion.row.id
    assert run.challenger_score is not None and run.champion_score is not None
    assert run.promoted == (run.challenger_score > run.champion_score)
    serving = registry.serving(REPO)
    assert (serving is not None) == run.promoted
    challenger = registry.get(result.message.split(":")[0])
    assert challenger.labels == champion.row.labels  # the same kinds, warm-started head
    assert result.summary().endswith(f"Verdict: {verdict(run)}.")


def test_a_repositorys_challenger_starts_from_the_global_model_and_is_judged_against_its_own(
        session, registry, champion, trained_minilm, small_train):
    """Re-fine-tuning the repository's own fine-tuned model on mostly the same issues did not help (the
    replay's gate kept every such challenger out): each retraining starts from the global model again."""
    own = registry.register(trained_minilm, scope=REPO)
    registry.promote(own.version, "the repository's earlier model", scope=REPO)
    confirm(session, REPO, small_train, [e.label for e in small_train])
    result = retrain_scope(session, registry, REPO, policy=POLICY, fast_path=NO_FAST_PATH)
    challenger = session.get(ModelVersion, result.run.challenger_version_id)
    assert read_card(challenger.path)["train_config"]["base_model"] == str(champion.encoder_directory)
    assert result.run.champion_version_id == own.row.id  # but it must beat what serves the repository


def test_a_challenger_is_registered_with_its_fast_path_built_and_gated(session, registry, champion, small_train,
                                                                     small_heldout):
    confirm(session, REPO, small_train, [e.label for e in small_train])
    result = retrain_scope(session, registry, REPO, policy=POLICY,
                           fast_path=FastPathOptions(gate_issues=small_heldout))
    challenger = session.get(ModelVersion, result.run.challenger_version_id)
    record = read_card(challenger.path)["fast_path"]
    assert "error" not in record and record["gates"][SERVES]["issues"] == len(small_heldout)
    assert record["gates"][SERVES]["issues_source"] == "given by the caller"


def test_too_few_confirmed_issues_is_a_message_not_a_run(session, registry, champion, small_train):
    confirm(session, REPO, small_train[:3], ["bug", "bug", "question"])
    result = retrain_scope(session, registry, REPO, policy=POLICY, fast_path=NO_FAST_PATH)
    assert result.run is None and "not enough confirmed issues to retrain yet, waiting" in result.message
    assert "the gate judges on the 4 most recent" in result.message
    assert session.query(TrainingRun).count() == 0


def test_scopes_with_enough_new_confirmations_are_due(session, small_train):
    confirm(session, REPO, small_train[:6], [e.label for e in small_train[:6]])
    confirm(session, "octo/quiet", small_train[6:8], [e.label for e in small_train[6:8]])
    assert scopes_due(session, POLICY) == [GLOBAL_SCOPE, REPO]
    session.add(TrainingRun(scope=REPO, started_at=dt.datetime.now(dt.timezone.utc)))
    session.flush()
    assert scopes_due(session, POLICY) == [GLOBAL_SCOPE]


def test_other_repositories_issues_of_known_kinds_are_offered_to_a_repositorys_tfidf(session, small_train):
    confirm(session, REPO, small_train[:4], [e.label for e in small_train[:4]])
    confirm(session, "octo/other", small_train[4:7], ["enhancement", "area: ui", "bug"])
    others = other_repositories_examples(session, REPO, ["bug", "feature", "question"])
    assert sorted((e.repo, e.label) for e in others) == [("octo/other", "bug"), ("octo/other", "feature")]
    assert other_repositories_examples(session, GLOBAL_SCOPE, ["bug", "feature", "question"]) == []
    recent = other_repositories_examples(session, REPO, ["bug", "feature", "question"],
                                         policy=RetrainPolicy(max_borrowed=1))
    assert [(e.repo, e.label) for e in recent] == [("octo/other", "bug")]  # only the newest is read


def test_a_challenger_is_trained_with_the_champions_recipe_read_back_from_its_card(tmp_path):
    from core.card import ModelCard, write_card
    from trainer.config import TrainConfig
    from trainer.registry import Model
    from trainer.retrain import challenger_config

    recipe = TrainConfig(lr=5e-5, batch_size=8, max_length=128, truncation="head+tail", tfidf_share=0.7,
                         epochs=3, max_steps=7, device="cuda", class_weight="balanced")
    write_card(tmp_path, version="champion", labels=["bug", "feature"], kind="blend", base_model="minilm",
               max_length=128, thresholds=None, metrics=None, data_fingerprint="", train_config=recipe.to_dict(),
               tfidf_share=0.7)
    base = Model(ModelVersion(path=str(tmp_path)), ModelCard.read(tmp_path))
    config = challenger_config(base, RetrainPolicy(epochs=1))
    assert (config.lr, config.batch_size, config.max_length, config.truncation) == (5e-5, 8, 128, "head+tail")
    assert config.tfidf_share == 0.7 and config.base_model == str(tmp_path / "encoder")
    assert (config.epochs, config.max_steps, config.device) == (1, None, "auto")  # the retraining's own
    assert challenger_config(base, RetrainPolicy(max_length=64)).max_length == 64
    assert config.class_weight == "balanced"  # the global model's recipe, for the global scope
    # a repository's challenger learns its own label frequencies, as the replays measured
    assert challenger_config(base, RetrainPolicy(), scope="o/r").class_weight == "none"
