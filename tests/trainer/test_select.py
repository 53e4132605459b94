"""Encoder selection by the unseen protocol: each candidate and TF-IDF scored on repositories they never saw."""

import functools
import operator

import pytest

from core.card import base_model_name, read_card
from tests.trainer.conftest import NO_FAST_PATH
from trainer.baseline import BASE_MODEL
from trainer.select import BLEND_SHARES, BLEND_SUFFIX
from trainer.sources import MixConfig


@pytest.mark.slow  # fine-tunes MiniLM
def test_select_scores_every_candidate_and_the_baseline_by_unseen_repositories_and_registers_the_best(
        registry, minilm_config, minilm_path, tiny_bert_dir, small_train):
    from trainer.select import select_encoder

    sources = {"nlbse": small_train}
    selection = select_encoder([minilm_path, str(tiny_bert_dir)], sources, minilm_config, folds=2,
                               mix=MixConfig(title_drop=0.0), registry=registry, fast_path=NO_FAST_PATH)
    # each encoder alone, then as the App serves it: blended with the same folds' TF-IDF, share chosen nested
    assert [row["candidate"] for row in selection.rows] == [
        BASE_MODEL, minilm_path, minilm_path + BLEND_SUFFIX, str(tiny_bert_dir), str(tiny_bert_dir) + BLEND_SUFFIX]
    assert [row["kind"] for row in selection.rows] == ["tfidf", "transformer", "blend", "transformer", "blend"]
    for blend in selection.rows[2::2]:
        # a blend's share is strictly between 0 and 1: the members alone are the other rows
        assert len(blend["nested_shares"]) == 2 and 0 < blend["tfidf_share"] < 1
        curve = blend["share_curve"]  # every share's score over all folds: the chosen one is the best
        assert list(curve) == list(BLEND_SHARES) and curve[blend["tfidf_share"]] == max(curve.values())
        assert blend["train_seconds"] > selection.rows[0]["train_seconds"]  # the encoder's and TF-IDF's
    assert all(row["issues_per_second"] > 0 and row["whole_mix_minutes"] > 0 for row in selection.rows)
    best_score = max(row["mean_repo_macro_f1"] for row in selection.rows if row["within_budget"])
    assert selection.best["mean_repo_macro_f1"] == best_score
    folds = selection.best["metrics"]["folds"]
    assert len(folds) == 2 and sorted(functools.reduce(operator.iadd, folds, [])) == sorted({e.repo for e in small_train})
    registered = selection.registered
    assert registered.row.metrics["mean_repo_macro_f1"] == best_score
    assert registered.directory.is_dir()
    expected_base = BASE_MODEL if selection.best["kind"] == "tfidf" else selection.best["candidate"]
    assert registered.row.base_model == base_model_name(expected_base.removesuffix(BLEND_SUFFIX))  # hub id, not a path
    assert read_card(registered.directory)["kind"] == selection.best["kind"]  # a blend is registered as one
    assert registry.load(registered.version).labels == ["bug", "feature", "question"]


def test_a_candidate_over_the_training_budget_cannot_win(registry, minilm_config, tiny_bert_dir, small_train):
    from trainer.select import select_encoder

    selection = select_encoder([str(tiny_bert_dir)], {"nlbse": small_train}, minilm_config, folds=2,
                               budget_minutes=0.0)
    assert [row["within_budget"] for row in selection.rows] == [False, False, False]
    assert selection.best["candidate"] == BASE_MODEL  # TF-IDF, the bar, is always there to fall back on
