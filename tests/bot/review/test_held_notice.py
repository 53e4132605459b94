"""Nothing silently off: the App's single-file path was never set, so GitHub refuses the config file; the
issue gets no label, and the review page says the repository is held, why, and where to fix it."""

from __future__ import annotations

import pytest

from bot.labeling.config import CONFIG_PATH
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker
from tests.bot.review.conftest import sign_in

PAGE = f"/review/{REPO}"


def text(client, path: str) -> str:
    return " ".join(client.get(path).get_data(as_text=True).split())


@pytest.mark.redis
@pytest.mark.slow
def test_a_refused_config_holds_the_repository_and_both_pages_say_why_and_how(
        client, review_github, worker_context, payload, redis):
    review_github.set_installation(INSTALLATION, single_files=[])
    review_github.add_issue(REPO, 1, "App crashes on save", "Traceback: TypeError")
    opened = issue_payload(payload, "opened", 1, title="App crashes on save", body="Traceback: TypeError")
    assert deliver(client, "issues", opened, "held-1").status_code == 202
    run_worker(redis)
    assert review_github.issue_labels(REPO, 1) == [] and review_github.calls("POST", rf"/repos/{REPO}/.*") == []
    sign_in(client, review_github, "maintainer")
    for page in (PAGE, f"{PAGE}/quality"):
        shown = text(client, page)
        assert 'id="held"' in shown and "the bot applies nothing on this repository" in shown, page
        assert f"set Single file to `{CONFIG_PATH}`" in shown, page
