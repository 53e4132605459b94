"""The promotion gate: both models scored on the same held-out issues; only a strictly better one serves."""

import random

import pytest

from core.tables import TrainingRun
from trainer.baseline import train_tfidf
from trainer.dataset import Example
from trainer.evaluate import evaluate_classifier
from trainer.gate import compare_and_promote, verdict


@pytest.fixture(scope="module")
def weak_model(nlbse_train):
    """The baseline trained on shuffled labels: near chance."""
    examples = nlbse_train[::5]
    labels = [e.label for e in examples]
    random.Random(0).shuffle(labels)
    shuffled = [Example(e.title, e.body, label, e.repo) for e, label in zip(examples, labels, strict=True)]
    return train_tfidf(shuffled)


@pytest.fixture(scope="module")
def held_out(nlbse_test):
    return nlbse_test[::10]


def test_first_model_is_promoted_with_its_score(registry, tfidf_model, held_out, session):
    challenger = registry.register(tfidf_model)
    run = compare_and_promote(registry, challenger, held_out, trigger="bootstrap")
    assert run.promoted and run.champion_version_id is None and run.champion_score is None
    assert 0.5 < run.challenger_score <= 1.0
    assert registry.serving().version == challenger.version
    assert verdict(run) == (f"promoted {challenger.version}: no model served this scope "
                            f"({len(held_out)} held-out issues)")
    assert session.get(TrainingRun, run.id).trigger == "bootstrap"


def test_a_better_challenger_is_promoted(registry, tfidf_model, weak_model, held_out, session):
    champion = registry.register(weak_model)
    registry.promote(champion.version)
    challenger = registry.register(tfidf_model)
    run = compare_and_promote(registry, challenger, held_out, trigger="cron")
    assert run.promoted and registry.serving().version == challenger.version
    assert run.challenger_score > run.champion_score
    stored = session.get(TrainingRun, run.id)
    assert (stored.challenger_version_id, stored.champion_version_id) == (challenger.row.id, champion.row.id)
    assert (stored.n_examples, stored.status) == (len(held_out), "finished")


def test_a_worse_challenger_is_kept_out(registry, tfidf_model, weak_model, held_out):
    champion = registry.register(tfidf_model)
    registry.promote(champion.version)
    challenger = registry.register(weak_model)
    run = compare_and_promote(registry, challenger, held_out)
    assert not run.promoted and registry.serving().version == champion.version
    assert run.challenger_score < run.champion_score
    assert "kept out" in run.message
    assert verdict(run).startswith(f"not promoted {challenger.version}: kept out: macro-F1 ")


def test_a_tie_is_kept_out(registry, tfidf_model, held_out):
    registry.promote(registry.register(tfidf_model).version)
    run = compare_and_promote(registry, registry.register(tfidf_model), held_out)
    assert run.challenger_score == run.champion_score and not run.promoted


def test_force_overrides_a_worse_score(registry, tfidf_model, weak_model, held_out):
    registry.promote(registry.register(tfidf_model).version)
    challenger = registry.register(weak_model)
    run = compare_and_promote(registry, challenger, held_out, force=True)
    assert run.promoted and run.challenger_score < run.champion_score
    assert registry.serving().version == challenger.version


def test_without_held_out_issues_a_champion_stays(registry, tfidf_model):
    champion = registry.register(tfidf_model)
    registry.promote(champion.version)
    run = compare_and_promote(registry, registry.register(tfidf_model), [])
    assert not run.promoted and "--force" in run.message
    assert registry.serving().version == champion.version


def test_a_score_stored_for_exactly_these_issues_is_reused(registry, tfidf_model, held_out):
    """The bootstrap evaluates on the NLBSE test file and then gates on it: score it once, not twice."""
    result = evaluate_classifier(tfidf_model.classifier(), held_out)
    stored = {"macro_f1": 0.123, "eval_fingerprint": result["eval_fingerprint"]}
    challenger = registry.register(tfidf_model, metrics=stored)
    assert compare_and_promote(registry, challenger, held_out).challenger_score == 0.123
    other = registry.register(tfidf_model, metrics=stored)
    fewer = held_out[1:]  # other issues: the stored score does not apply
    assert compare_and_promote(registry, other, fewer).challenger_score == pytest.approx(
        evaluate_classifier(tfidf_model.classifier(), fewer)["macro_f1"])


class _Answers:
    """A stand-in classifier: the label `answer_for` gives each text."""

    def __init__(self, answer_for, version: str):
        self.answer_for, self.version, self.labels = answer_for, version, ["bug", "feature", "question"]

    def predict(self, texts):
        return [{label: float(label == self.answer_for(text)) for label in self.labels} for text in texts]


def test_each_model_is_scored_as_it_is_loaded_on_the_same_issues(registry, tfidf_model, held_out):
    """The gate scores what `classifier_of` loads (the model as it serves, by default), both on the same rows."""
    champion = registry.register(tfidf_model)
    registry.promote(champion.version)
    challenger = registry.register(tfidf_model)
    truth = {example.text: example.label for example in held_out}
    loaded = []

    def classifier_of(model):
        loaded.append(model.version)
        if model.version == challenger.version:
            return _Answers(truth.get, model.version)
        return _Answers(lambda text: "question", model.version)

    run = compare_and_promote(registry, challenger, held_out, classifier_of=classifier_of)
    assert loaded == [challenger.version, champion.version]
    assert run.challenger_score == 1.0 and run.champion_score < 0.5
    assert run.promoted and registry.serving().version == challenger.version
