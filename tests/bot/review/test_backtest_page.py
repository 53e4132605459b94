"""The dry run comes before the first label: installing the App backfills the repository's labelled issues,
and a feedback job replays them through the served decision; the quality page shows its report, and a
maintainer may run it again there."""

from __future__ import annotations

import pytest

from bot.labeling.backtest import REPORTS
from tests.bot.conftest import INSTALLATION, REPO, deliver, run_worker
from tests.bot.review.conftest import csrf_token, sign_in
from tests.paths import NLBSE
from trainer.dataset import load_file

PAGE = f"/review/{REPO}/quality"
NAMES = {"bug": "bug", "feature": "enhancement", "question": "question"}


def text(client, path: str) -> str:
    return " ".join(client.get(path).get_data(as_text=True).split())


@pytest.mark.redis
@pytest.mark.slow
def test_installing_runs_the_dry_run_after_the_backfill_and_the_quality_page_shows_it(
        client, review_github, worker_context, payload, redis):
    examples = [e for e in load_file(NLBSE / "issues_test.csv") if e.repo == "opencv/opencv"][:16]
    for number, example in enumerate(examples, 1):
        review_github.add_issue(REPO, number, example.title, example.body, labels=[NAMES[example.label]],
                                state="closed", created_at=example.created_at)
    installed = payload("installation/created")
    installed["installation"]["id"] = INSTALLATION
    installed["repositories"] = [{"id": 1, "node_id": "R_1", "name": "Hello-World", "full_name": REPO,
                                  "private": False}]
    assert deliver(client, "installation", installed, "install-1").status_code == 202
    run_worker(redis)

    report = REPORTS.last(redis, REPO)
    assert report is not None and report["issues"] == 16 and report["history"] == 0
    assert sum(report["outcomes"].values()) == 16
    assert review_github.calls("POST", rf"/repos/{REPO}/.*") == []  # the dry run wrote nothing
    sign_in(client, review_github, "maintainer")
    shown = text(client, PAGE)
    assert "Dry run on this repository's history" in shown
    assert f"<strong>{report['labelled']} of {report['issues']}</strong>" in shown
    assert 'id="backtest-kinds"' in shown and 'id="job-backtest"' in shown and "Dry run" in shown
    chart = client.get(f"/review/{REPO}/charts/backtest.png")
    assert chart.status_code == 200 and chart.data[:4] == b"\x89PNG"
    again = client.post(f"/review/{REPO}/models/backtest", data={"csrf_token": csrf_token(client)},
                        follow_redirects=True)
    assert "A backtest of" in again.get_data(as_text=True)  # the automatic run's cooldown holds the button
