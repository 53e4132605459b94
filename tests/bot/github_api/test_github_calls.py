"""What one labelling job asks GitHub: one write, and no read whose answer the bot already holds.

Through the real pipeline (signed delivery → Redis → RQ worker → PyGithub → the fake GitHub over HTTP),
counting the fake's recorded requests job by job.
"""

import datetime as dt

import pytest

from bot.labeling.config import CONFIG_PATH
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker

# the fresh window as in production: a delivery younger than it is not read again
pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.settings(fresh_delivery_seconds=10.0)]
ORG_CONFIG = "Codertocat/.github"
TITLES = {1: "App crashes with TypeError when saving", 2: "Add dark mode to the settings page",
          3: "How do I configure the proxy?", 4: "Segfault when the config file is empty"}


def open_issue(fake_github, client, payload, number: int, *, age_seconds: float = 0.0) -> list:
    """Deliver issues.opened as GitHub sends it (its `updated_at` is when it was written), run the worker,
    and return the requests the job made, as (method, path, status)."""
    before = len(fake_github.requests)
    fake_github.add_issue(REPO, number, TITLES[number], "Steps to reproduce: see the title.")
    data = issue_payload(payload, "opened", number, title=TITLES[number], body="Steps to reproduce: see the title.")
    written = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age_seconds)
    data["issue"]["created_at"] = data["issue"]["updated_at"] = written.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert deliver(client, "issues", data, f"d-{number}").status_code == 202
    run_worker(worker_redis(client))
    return [(r.method, r.path, r.status) for r in fake_github.requests[before:]]


def worker_redis(client):
    return client.application.extensions["bot"]["redis"]


def label_write(number: int) -> tuple:
    return ("POST", f"/repos/{REPO}/issues/{number}/labels", 200)


def unchanged(repo: str) -> tuple:
    return ("GET", f"/repos/{repo}/contents/{CONFIG_PATH}", 304)


@pytest.mark.parametrize("config_in, revalidated", [
    ((), []),  # no config anywhere: the two 404s are believed for ISSUE_SORTER_MISSING_CONFIG_CACHE_SECONDS
    ((REPO,), [REPO]),  # the repository's file: one conditional GET, answered 304
    ((ORG_CONFIG,), [ORG_CONFIG]),  # the organisation's: the repository's 404 is cached, the org's file 304
], ids=["no-config", "repo-config", "org-config"])
def test_a_job_for_an_unchanged_config_and_label_set_makes_one_write_and_no_repeated_read(
        worker_context, fake_github, client, payload, config_in, revalidated):
    for repo in config_in:
        fake_github.add_repo(repo, labels=fake_github.repo_labels(REPO) if repo == REPO else (),
                             installation_id=INSTALLATION, files={CONFIG_PATH: "threshold: 0\n"})

    first = open_issue(fake_github, client, payload, 1)
    second = open_issue(fake_github, client, payload, 2)
    third = open_issue(fake_github, client, payload, 3)

    # The first job fetches the token, the config chain and the labels once, and reads the issue not at all.
    assert ("GET", f"/repos/{REPO}/labels", 200) in first and label_write(1) in first
    assert not [r for r in first if r[1] == f"/repos/{REPO}/issues/1"]
    # After it: the write, plus a 304 for each config file that exists. Nothing else, in this order.
    assert second == [unchanged(repo) for repo in revalidated] + [label_write(2)]
    assert third == [unchanged(repo) for repo in revalidated] + [label_write(3)]
    assert all(len(fake_github.issue_labels(REPO, n)) == 1 for n in (1, 2, 3))


def test_a_changed_config_file_is_read_again_and_applies_at_once(worker_context, fake_github, client, payload):
    fake_github.add_repo(REPO, labels=fake_github.repo_labels(REPO), installation_id=INSTALLATION,
                         files={CONFIG_PATH: "threshold: 0\n"})
    open_issue(fake_github, client, payload, 1)
    fake_github.add_repo(REPO, labels=fake_github.repo_labels(REPO), installation_id=INSTALLATION,
                         files={CONFIG_PATH: "mode: off\n"})  # a new commit: a new blob, a new ETag

    calls = open_issue(fake_github, client, payload, 2)

    assert calls == [("GET", f"/repos/{REPO}/contents/{CONFIG_PATH}", 200)]  # and no label: mode is off
    assert fake_github.issue_labels(REPO, 2) == []


def test_a_label_webhook_makes_the_next_job_list_the_labels_again(worker_context, fake_github, client, payload):
    open_issue(fake_github, client, payload, 1)
    fake_github.add_repo(REPO, labels=["type: bug", "type: feature", "type: question"],
                         installation_id=INSTALLATION)  # the maintainers renamed their labels
    renamed = payload("label/edited") | {"installation": {"id": INSTALLATION}}
    renamed["repository"]["full_name"] = REPO
    assert deliver(client, "label", renamed, "d-label").status_code == 202
    run_worker(worker_redis(client))

    calls = open_issue(fake_github, client, payload, 2)

    assert ("GET", f"/repos/{REPO}/labels", 200) in calls
    assert fake_github.issue_labels(REPO, 2)[0].startswith("type: ")
    assert open_issue(fake_github, client, payload, 3) == [label_write(3)]  # cached again


def test_a_delivery_older_than_the_fresh_window_is_read_again_from_github(worker_context, fake_github, client,
                                                                         payload):
    """A redelivery, a retry or a long queue: the issue may have been labelled or closed since."""
    open_issue(fake_github, client, payload, 1)
    fresh_seconds = worker_context.settings.fresh_delivery_seconds

    calls = open_issue(fake_github, client, payload, 2, age_seconds=fresh_seconds + 5)

    assert calls == [("GET", f"/repos/{REPO}/issues/2", 200), label_write(2)]
