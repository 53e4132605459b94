"""The model commands of issue-sorter, run through the command tree against a temp database and MODEL_DIR."""

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from core import engines
from core.card import ModelCard
from core.settings import Settings
from core.tables import TrainingRun
from issue_sorter.cli import main
from trainer.config import BOOTSTRAP_RECIPE


@pytest.fixture
def settings(database_url, model_dir) -> Settings:
    return Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)


@pytest.fixture
def run_cli(settings):
    def run(*argv: str) -> int:
        return main([str(arg) for arg in argv], load=lambda **_: settings)

    return run


def _write_jsonl(path, examples):
    rows = [{"title": e.title, "body": e.body, "label": e.label, "repo": e.repo} for e in examples]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_evaluate_json_prints_one_object_with_every_metric(run_cli, registry, session, tfidf_model,
                                                           small_heldout, tmp_path, capsys):
    registry.promote(registry.register(tfidf_model).version)
    session.commit()
    rows = small_heldout + [small_heldout[0].__class__("Fix the README", "", "docs", "a/b")]
    data = _write_jsonl(tmp_path / "heldout.jsonl", rows)
    assert run_cli("evaluate", data, "--json", "--confusion-png", tmp_path / "c.png") == 0
    result = json.loads(capsys.readouterr().out)
    assert {"macro_f1", "mean_repo_macro_f1", "per_repo", "per_label", "confusion", "labels", "n_scored",
            "n_skipped", "issues_per_second", "thresholds"} <= result.keys()
    assert (result["n_scored"], result["n_skipped"]) == (len(small_heldout), 1)
    assert result["engine"] is None  # TF-IDF alone: no encoder ran
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")


def test_evaluate_without_a_model_says_how_to_get_one(run_cli, small_heldout, tmp_path, capsys):
    data = _write_jsonl(tmp_path / "heldout.jsonl", small_heldout)
    assert run_cli("evaluate", data) == 1
    assert "issue-sorter bootstrap-model" in capsys.readouterr().err


def test_a_training_precision_outside_the_choices_is_refused_before_any_work(run_cli, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        run_cli("train", tmp_path / "never-read.jsonl", "--precision", "fp16")
    assert exit_.value.code == 2 and "--precision: invalid choice: 'fp16'" in capsys.readouterr().err


def test_measure_precision_refuses_a_run_of_no_steps_before_any_work(run_cli, capsys):
    assert run_cli("measure-precision", "--steps", 0) == 1
    assert "--steps and --held-out must be at least 1" in capsys.readouterr().err


def test_train_registers_and_promotes_then_models_and_rollback(run_cli, settings, registry, tiny_bert_dir,
                                                               small_train, small_heldout, tmp_path, capsys,
                                                               without_shared):
    train_file = _write_jsonl(tmp_path / "train.jsonl", small_train)
    eval_file = _write_jsonl(tmp_path / "eval.jsonl", small_heldout)
    assert run_cli("train", train_file, "--base-model", tiny_bert_dir, "--max-length", 32, "--epochs", 1,
                   "--batch-size", 8, "--precision", "fp32", "--eval", eval_file, "--promote", "--no-progress") == 0
    serving = registry.serving()
    assert serving is not None and serving.base_model == str(tiny_bert_dir)
    assert serving.metrics["n_scored"] == len(small_heldout)
    served = registry.load()
    assert served.card.extra["train_config"]["max_length"] == 32
    assert served.card.extra["train_config"]["precision"] == "fp32"  # no bf16 gate: trained once, in fp32
    assert served.card.fast_path["gates"]  # `train` built and gated the fast path (trainer.pipeline), on --eval
    capsys.readouterr()
    assert run_cli("evaluate", eval_file, "--json") == 0
    scored = json.loads(capsys.readouterr().out)  # nothing else on stdout
    assert scored["model_version"] == serving.version
    assert scored["engine"] in engines.ENGINES  # the engine that scored it here, as it would serve
    forced = engines.TORCH_FP32 if scored["engine"] != engines.TORCH_FP32 else engines.ORT_FP32
    assert main(["evaluate", str(eval_file), "--json"],  # as a worker with ISSUE_SORTER_ENGINE set serves it
                load=lambda **_: dataclasses.replace(settings, engine=forced)) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == forced
    assert run_cli("models") == 0
    assert f"* {serving.version}" in capsys.readouterr().out
    assert run_cli("rollback") == 1
    assert "nothing to roll back to" in capsys.readouterr().err


def test_train_with_the_tfidf_baseline_as_base_model_registers_it_alone_with_its_thresholds(
        run_cli, registry, small_train, small_heldout, tmp_path, capsys):
    train_file = _write_jsonl(tmp_path / "train.jsonl", small_train)
    eval_file = _write_jsonl(tmp_path / "eval.jsonl", small_heldout)
    assert run_cli("train", train_file, "--base-model", "tfidf-logreg", "--eval", eval_file, "--no-progress") == 0
    assert "trained in" in capsys.readouterr().out
    [row] = registry.list()
    card = ModelCard.read(row.path)
    assert card.kind == "tfidf" and card.thresholds == row.metrics["thresholds"] and card.thresholds
    assert card.extra["train_data"] == {"source": str(train_file), "issues": len(small_train)}


def test_promote_goes_through_the_gate_unless_forced(run_cli, registry, session, tfidf_model, capsys):
    champion, challenger = registry.register(tfidf_model), registry.register(tfidf_model)
    registry.promote(champion.version)
    session.commit()
    assert run_cli("promote", challenger.version) == 1  # no human-confirmed issues to compare on
    assert "--force" in capsys.readouterr().out
    assert run_cli("promote", challenger.version, "--force") == 0
    session.expire_all()
    assert registry.serving().version == challenger.version
    assert run_cli("rollback") == 0
    session.expire_all()
    assert registry.serving().version == champion.version


@pytest.mark.slow  # fine-tunes MiniLM
def test_bootstrap_model_fine_tunes_the_offline_minilm_and_promotes_it(
        run_cli, registry, session, small_train, small_heldout, tmp_path, capsys):
    data = _write_jsonl(tmp_path / "issues_train.jsonl", small_train)
    _write_jsonl(tmp_path / "held.jsonl", small_heldout)
    assert run_cli("bootstrap-model", "--data", data, "--eval", tmp_path / "held.jsonl", "--max-steps", 1,
                   "--max-length", 32, "--no-progress") == 0
    out = capsys.readouterr().out
    assert "bootstrap: fine-tuning" in out and "bootstrap done in" in out
    serving = registry.serving()
    assert serving.base_model == "sentence-transformers/all-MiniLM-L6-v2"  # its hub id, not this machine's path
    assert "fine-tuning sentence-transformers/all-MiniLM-L6-v2 on" in out
    card = ModelCard.read(Path(serving.path))  # the benchmark's recipe: MiniLM blended with TF-IDF
    assert card.kind == "blend" and card.extra["tfidf_share"] == BOOTSTRAP_RECIPE["tfidf_share"]
    assert card.extra["train_config"]["lr"] == BOOTSTRAP_RECIPE["lr"]
    assert card.extra["train_config"]["class_weight"] == "balanced"  # what the unseen protocol chose
    run = session.query(TrainingRun).one()
    assert (run.trigger, run.promoted, run.champion_score) == ("bootstrap", True, None)


@pytest.mark.parametrize("state", ["no file", "empty file"])
def test_an_unmigrated_database_is_named_before_any_training(state, tmp_path, model_dir, small_train, capsys):
    database = tmp_path / "var" / "issue-sorter.db"
    if state == "empty file":
        database.parent.mkdir()
        sqlite3.connect(database).close()
    settings = Settings(webhook_secret="", database_url=f"sqlite:///{database}", model_dir=model_dir)
    data = _write_jsonl(tmp_path / "issues.jsonl", small_train)
    assert main(["bootstrap-model", "--data", str(data), "--no-progress"], load=lambda **_: settings) == 1
    assert "run `issue-sorter migrate` first" in capsys.readouterr().err
    assert not model_dir.exists()  # nothing was trained
    assert database.exists() == (state == "empty file")  # no database file appears as a side effect


def test_bootstrap_without_data_names_the_fix(run_cli, tmp_path, capsys):
    assert run_cli("bootstrap-model", "--data", tmp_path / "missing.csv") == 1
    assert "ISSUE_SORTER_BOOTSTRAP_DATA" in capsys.readouterr().err


def test_select_scores_by_unseen_repositories_prints_speed_and_registers_without_promoting(
        run_cli, registry, tiny_bert_dir, small_train, tmp_path, capsys, without_shared):
    data = _write_jsonl(tmp_path / "nlbse.jsonl", small_train)
    assert run_cli("select", data, "--candidates", tiny_bert_dir, "--max-length", 32, "--epochs", 1,
                   "--batch-size", 8, "--folds", 2, "--no-progress") == 0
    out = capsys.readouterr().out
    assert "tfidf-logreg" in out and f"{tiny_bert_dir} + TF-IDF" in out and "best:" in out and "issues/s" in out
    assert "unseen repositories, 2 folds" in out and "by TF-IDF share: 0.1 " in out
    [registered] = registry.list()
    assert registered.metrics["per_repo"].keys() == {e.repo for e in small_train}  # every repo scored unseen
    assert registry.serving() is None


def test_evaluate_reads_a_body_only_docs_file_of_shared_and_reports_docs_precision_and_recall(
        run_cli, registry, session, capsys):
    from tests.paths import DATA
    from trainer.baseline import train_tfidf
    from trainer.sources import capped, load_sources, training_mix

    sources = load_sources(DATA)
    mix = training_mix({name: capped(examples, 15, 1) for name, examples in sources.items()},
                       exclude=["pytorch/pytorch"])
    registry.promote(registry.register(train_tfidf(mix)).version)
    session.commit()
    docs_file = DATA / "ccims-issue-classification" / "pytorch_pytorch_documentation.json"
    assert run_cli("evaluate", docs_file) == 0
    out = capsys.readouterr().out
    [docs] = [line for line in out.splitlines() if line.strip().startswith("docs ")]
    precision, recall = float(docs.split(" P ")[1].split()[0]), float(docs.split(" R ")[1].split()[0])
    assert precision == 1.0 and 0.0 < recall <= 1.0  # every issue there is docs: precision is 1 once any is found
    assert "pytorch/pytorch" in out
