"""`issue-sorter backtest` on a recorded repository through the fake GitHub: its figures are the replay's with
history on the same issues (simulation.replay, without retraining), since both run the one engine
(bot.labeling.backtest.Replay): the App's own decision growing its memory issue by issue."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bot.labeling.config import CONFIG_PATH
from core.migrate import upgrade
from issue_sorter.cli import main
from simulation.fake_github import FakeGitHub
from simulation.replay import DEFAULT_LABELS, ReplayOptions, replay
from tests.paths import NLBSE
from tests.tiny_model import promote_model
from trainer.dataset import load_file

REPO, HISTORY, ISSUES, WINDOW = "opencv/opencv", 12, 40, 7

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded():
    """opencv/opencv's oldest labelled issues of NLBSE'24's test split, in time order."""
    examples = [e for e in load_file(NLBSE / "issues_test.csv") if e.repo == REPO]
    return sorted(examples, key=lambda e: e.created_at)[:ISSUES]


def test_the_backtests_figures_are_the_replays_with_history_on_the_same_issues(recorded, settings, tiny_model_dir,
                                                                               tmp_path, capsys):
    with FakeGitHub(app_id=5) as fake:
        fake.add_repo(REPO, labels=list(DEFAULT_LABELS.values()), installation_id=2,
                      files={CONFIG_PATH: "threshold: 0.0\n"})  # the replay's config: every issue labelled
        for number, example in enumerate(recorded, 1):
            fake.add_issue(REPO, number, example.title, example.body, labels=[DEFAULT_LABELS[example.label]],
                           state="closed", created_at=example.created_at)
        app = dataclasses.replace(settings, app_id=5, private_key=fake.private_key_pem, api_url=fake.url)
        upgrade(app.database_url)
        promote_model(app.database_url, app.model_dir, tiny_model_dir)
        code = main(["backtest", REPO, "--history", str(HISTORY), "--window", str(WINDOW), "--json",
                     "--out", str(tmp_path / "out")], load=lambda **_: app)
        assert code == 0
        report = json.loads(capsys.readouterr().out)
        assert fake.calls("POST", rf"/repos/{REPO}/.*") == [] and fake.calls("DELETE", ".*") == []  # wrote nothing

    replayed = replay(recorded[HISTORY:], ReplayOptions(REPO, retrain=False, window=WINDOW), tiny_model_dir,
                      workdir=tmp_path / "replay", progress=False, history=recorded[:HISTORY])

    assert (report["history"], report["issues"]) == (replayed["history"], replayed["issues"]) == (HISTORY,
                                                                                                  ISSUES - HISTORY)
    assert report["labelled"] == report["issues"]  # a threshold of 0: every issue labelled, as in the replay
    assert report["accuracy"] == report["precision"] == pytest.approx(replayed["accuracy_overall"])
    assert report["macro_f1"] == pytest.approx(replayed["macro_f1_overall"])
    assert [point["accuracy"] for point in report["curve"]] == pytest.approx(
        [point["accuracy"] for point in replayed["curve"]])
    assert [point["seen"] for point in report["curve"]] == [point["seen"] for point in replayed["curve"]]
    assert (tmp_path / "out" / "opencv-opencv-backtest.png").read_bytes()[:4] == b"\x89PNG"
