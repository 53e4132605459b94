"""`issue-sorter backtest`: its refusals in one line each, and its report in words (its figures against the
replay: tests/bot/labeling/test_backtest_replay.py)."""

from __future__ import annotations

import dataclasses

import pytest

from bot.labeling.backtest import Remembering, backtest
from core.migrate import upgrade
from issue_sorter.backtest_command import describe, write_report
from issue_sorter.cli import main
from simulation.fake_github import FakeGitHub
from tests.bot.labeling.test_backtest import ENCODER, HISTORY, SETTINGS
from tests.bot.rules import REPO, repository


def test_it_needs_the_apps_credentials_and_a_promoted_model(settings):
    upgrade(settings.database_url)
    with pytest.raises(SystemExit, match="set GITHUB_APP_ID and GITHUB_PRIVATE_KEY"):
        main(["backtest", REPO], load=lambda **_: settings)
    with FakeGitHub(app_id=3) as fake:
        app = dataclasses.replace(settings, app_id=3, private_key=fake.private_key_pem, api_url=fake.url)
        with pytest.raises(SystemExit, match="no model is promoted"):
            main(["backtest", REPO], load=lambda **_: app)


def test_the_report_in_words_and_its_files(tmp_path):
    result = backtest(HISTORY, repo=REPO, classifier=ENCODER, settings=SETTINGS, github=Remembering(repository()))
    text = describe(result)
    assert f"{REPO}: 40 labelled issues replayed in time order through fake-1" in text
    assert f"it would have labelled {result['labelled']} of 40 issues" in text and "(target 90%)" in text
    assert "abstained on: " in text and "thresholds it would serve now: bug " in text
    report, plot = write_report(result, tmp_path)
    assert report.name == "octo-widgets-backtest.json" and plot.read_bytes()[:4] == b"\x89PNG"
