"""`issue-sorter replay` drives the whole loop: the App's decisions, the maintainer, retraining, curve."""

import json

import pytest

from issue_sorter.cli import main
from tests.paths import NLBSE

pytestmark = pytest.mark.slow


def test_replay_feeds_issues_in_time_order_and_retrains_through_the_training_queue(
        tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "curve"
    # opencv's oldest issues mix questions and feature requests: both kinds reach the retraining
    code = main(["replay", str(NLBSE / "issues_test.csv"), "--repo", "opencv/opencv", "--limit", "48",
                 "--retrain-every", "24", "--window", "12", "--epochs", "1", "--max-length", "48",
                 "--min-per-label", "3", "--min-holdout", "6", "--base-model-dir", str(tiny_model_dir),
                 "--out", str(out), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [point["seen"] for point in result["curve"]] == [0, 12, 24, 36]
    assert all(0.0 <= point["accuracy"] <= 1.0 for point in result["curve"])
    assert result["accuracy_first_window"] == result["curve"][0]["accuracy"]
    assert result["accuracy_last_window"] == result["curve"][-1]["accuracy"]
    (retrain,) = result["retrains"]  # after 24 issues; none after the last one
    assert retrain["seen"] == 24 and "macro-F1 of the serving model" in retrain["result"]
    assert result["curve"][0]["model"] != retrain["serving"] or "not promoted" in retrain["result"]
    assert (out / "learning_curve.csv").read_text().startswith("seen,accuracy,macro_f1,model,issues")
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_replay_of_a_repository_absent_from_the_file_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(SystemExit, match="no issues of nobody/nothing"):
        main(["replay", str(NLBSE / "issues_test.csv"), "--repo", "nobody/nothing",
              "--base-model-dir", str(tiny_model_dir), "--out", str(tmp_path)])


def test_replay_with_history_installs_the_app_on_it_and_its_backfill_fills_the_memory(
        tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "curve"
    code = main(["replay", str(NLBSE / "issues_test.csv"), "--repo", "opencv/opencv", "--order", "shuffled",
                 "--history", "12", "--limit", "8", "--window", "4", "--no-retrain",
                 "--base-model-dir", str(tiny_model_dir), "--out", str(out), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the history was read from the fake GitHub's list-issues endpoint as the backfill reads it, and the fill
    # embedded all of it, before the first new issue was opened
    assert result["history_pages_read"] >= 1
    assert (result["history"], result["history_backfilled"], result["memory_at_install"]) == (12, 12, 12)
    assert result["issues"] == 8 and [point["seen"] for point in result["curve"]] == [0, 4]
    for point in result["curve"]:
        assert 0.0 <= point["macro_f1"] <= 1.0 and 0.0 <= point["accuracy"] <= 1.0
    assert 0.0 <= result["macro_f1_overall"] <= 1.0
    assert (out / "learning_curve.csv").read_text().startswith("seen,accuracy,macro_f1,model,issues")


def test_replay_with_a_history_as_long_as_the_file_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(SystemExit, match="--history 5000 leaves no new issue"):
        main(["replay", str(NLBSE / "issues_test.csv"), "--repo", "opencv/opencv", "--history", "5000",
              "--base-model-dir", str(tiny_model_dir), "--out", str(tmp_path)])


def test_replay_with_a_target_precision_abstains_below_each_kinds_threshold(tiny_model_dir, tmp_path, capsys):
    arguments = ["replay", str(NLBSE / "issues_test.csv"), "--repo", "opencv/opencv", "--order", "shuffled",
                 "--history", "12", "--limit", "8", "--window", "4", "--no-retrain",
                 "--base-model-dir", str(tiny_model_dir), "--out", str(tmp_path / "curve"), "--json"]
    assert main(arguments) == 0
    flat = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*arguments, "--target-precision", "0.9"]) == 0
    target = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    # without a target every issue is labelled and judged; with one, the repository's config asks for it
    assert flat["config"]["target_precision"] is None and flat["coverage"] == 1.0 and flat["thresholds"] == {}
    assert target["config"]["target_precision"] == 0.9
    assert set(target["thresholds"]) == {"bug", "feature", "question"}
    # the tiny model's scores are far from 0.9 precision: it abstains, each time below its kind's threshold
    assert target["coverage"] < 1.0 and target["abstained"]["issues"] == 8 - target["labelled"]
    assert target["abstained"]["examples"]
    assert all(row["score"] < row["threshold"] for row in target["abstained"]["examples"])


def test_replay_with_a_target_precision_out_of_range_is_a_clear_error(tiny_model_dir, tmp_path):
    # the repository config file's own words: the replay writes the target into that file
    with pytest.raises(SystemExit, match=r"--target-precision: target_precision must be a number between 0 and 1 "
                                         r"\(above 0.*or off, not `1.5`"):
        main(["replay", str(NLBSE / "issues_test.csv"), "--repo", "opencv/opencv", "--target-precision", "1.5",
              "--base-model-dir", str(tiny_model_dir), "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())  # refused before any work


@pytest.mark.parametrize("target", [0.0, 1.5, float("nan"), True])
def test_a_replay_asked_for_a_target_the_config_file_would_refuse_is_refused_when_its_options_are_made(target):
    from simulation.replay import ReplayOptions

    with pytest.raises(ValueError, match="target_precision must be a number between 0 and 1"):
        ReplayOptions("opencv/opencv", target_precision=target)


def test_a_replay_labels_every_issue_without_a_target_and_abstains_as_the_app_does_with_one(tmp_path):
    from types import SimpleNamespace

    from core.settings import Settings
    from simulation.replay import ReplayOptions, _settings

    github = SimpleNamespace(app_id=1, private_key_pem="key", url="http://127.0.0.1:1")

    def threshold(**options) -> float:
        return _settings(ReplayOptions("opencv/opencv", **options), tmp_path, "redis://127.0.0.1:1/0", github).threshold

    assert threshold() == 0.0  # no target: every issue labelled, so every issue is judged
    app_default = Settings(webhook_secret="x").threshold
    assert app_default > 0.0 and threshold(target_precision=0.9) == app_default  # a direct caller's target
    assert threshold(target_precision=0.9, threshold=0.3) == 0.3  # the CLI's ISSUE_SORTER_THRESHOLD
    assert threshold(threshold=0.4) == 0.4
