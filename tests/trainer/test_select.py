"""Encoder selection: each candidate fine-tuned and scored beside TF-IDF on held-out projects."""

from pathlib import Path

from trainer.baseline import BASE_MODEL
from trainer.dataset import split_by_repo


def test_select_scores_every_candidate_and_the_baseline_and_registers_the_best(
        registry, minilm_config, minilm_path, tiny_bert_dir, small_train, small_heldout):
    train, _ = split_by_repo(small_train, ["opencv/opencv"])
    _, held_out = split_by_repo(small_heldout, ["opencv/opencv"])
    from trainer.select import select_encoder

    selection = select_encoder([minilm_path, str(tiny_bert_dir)], train, held_out, minilm_config,
                               registry=registry)
    assert [row["candidate"] for row in selection.rows] == [BASE_MODEL, minilm_path, str(tiny_bert_dir)]
    assert [row["kind"] for row in selection.rows] == ["tfidf", "transformer", "transformer"]
    best_score = max(row["macro_f1"] for row in selection.rows)
    assert selection.best["macro_f1"] == best_score
    assert selection.best is next(row for row in selection.rows if row["macro_f1"] == best_score)
    registered = selection.registered
    assert registered.metrics["macro_f1"] == best_score
    assert Path(registered.path).is_dir()
    expected_base = BASE_MODEL if selection.best["kind"] == "tfidf" else selection.best["candidate"]
    assert registered.base_model == expected_base
    assert registry.load(registered.version).labels == ["bug", "feature", "question"]
    assert all(row["metrics"]["n_scored"] == len(held_out) for row in selection.rows)
