"""`issue-sorter run` (and `cron`) say at start whether every installation may read the config file, through
the fake GitHub's GET /app and /app/installations: a path never set would hold every private repository."""

from __future__ import annotations

import dataclasses

import pytest

from bot.github_api.config_access import may_read_config
from issue_sorter.app_check import check_config_access
from simulation.fake_github import FakeGitHub

CONFIG = ".github/issue-sorter.yml"


@pytest.fixture
def fake():
    with FakeGitHub(app_id=7) as github:
        github.add_repo("octo/widgets", installation_id=3)
        github.add_repo("acme/tools", installation_id=4)
        yield github


@pytest.fixture
def app(settings, fake):
    return dataclasses.replace(settings, app_id=7, private_key=fake.private_key_pem, api_url=fake.url,
                               web_url="https://github.example")


def said(settings) -> tuple[list[str], list[str]]:
    lines: list[str] = []
    return check_config_access(settings, say=lines.append), lines


def test_every_installation_with_the_path_set_is_said_in_one_line(app):
    warnings, lines = said(app)
    assert warnings == [] and lines == [f"every installation of the App (2) may read {CONFIG}"]


def test_an_installation_without_the_single_file_path_is_named_with_where_to_set_it(app, fake):
    fake.set_installation(4, single_files=[])
    warnings, lines = said(app)
    assert len(warnings) == 1 and warnings[0].startswith(f"installation 4 (acme) may not read {CONFIG}")
    assert "https://github.example/organizations/octo/settings/apps/issue-sorter/permissions" in warnings[0]
    assert lines == [f"WARNING: {warnings[0]}"]


def test_an_app_installed_nowhere_says_where_to_install_it(app, fake):
    fake.set_installation(3, deleted=True)
    fake.set_installation(4, deleted=True)
    assert said(app) == ([], ["the App is not installed anywhere yet: "
                              "https://github.com/apps/issue-sorter/installations/new"])


def test_dry_run_asks_nothing_and_github_down_is_one_line(settings, app, fake):
    assert said(settings) == ([], [])
    fake.fail_next("GET", "/app", 500, times=5)
    warnings, lines = said(app)
    assert warnings == [] and len(lines) == 1 and lines[0].startswith(f"could not ask GitHub whether the App may read")


@pytest.mark.parametrize("installation,readable", [
    ({"permissions": {"single_file": "read"}, "single_file_paths": [CONFIG]}, True),
    ({"permissions": {"single_file": "read"}, "single_file_name": CONFIG, "single_file_paths": []}, True),
    ({"permissions": {"contents": "read"}}, True),
    ({"permissions": {"single_file": "read"}, "single_file_paths": [".github/other.yml"]}, False),
    ({"permissions": {"single_file": "read"}, "single_file_name": None, "single_file_paths": []}, False),
    ({"permissions": {"issues": "write"}, "single_file_paths": [CONFIG]}, False),
])
def test_which_permissions_read_the_config(installation, readable):
    assert may_read_config(installation) is readable
