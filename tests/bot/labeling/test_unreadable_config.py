"""A repository whose config file exists but cannot be read is held: nothing is written there, and the
prediction's reason and the log say why and how to fix it. The defaults would apply what the file forbids
(mode: off, allow, skip_authors), so the App fails closed, as on a file it cannot parse."""

from __future__ import annotations

import logging

import pytest

from bot.github_api.client import NotAFile, PermanentGitHubError
from bot.labeling.config import CONFIG_PATH
from tests.bot.rules import REPO, label, predictions, repository
from tests.fakes import FakeGitHub


class RefusingGitHub(FakeGitHub):
    """GitHub answering the config file with an error: `refusals` maps repository → the error raised."""

    def __init__(self, refusals: dict[str, Exception], **fields):
        super().__init__(**fields)
        self.refusals = refusals

    def get_file(self, repo: str, path: str, *, etag: str | None = None):
        if repo in self.refusals:
            self.calls.append(("get_file", repo, path))
            raise self.refusals[repo]
        return super().get_file(repo, path, etag=etag)


def refusing(refusals: dict[str, Exception]) -> RefusingGitHub:
    base = repository()
    return RefusingGitHub(refusals, labels=base.labels)


FORBIDDEN = PermanentGitHubError("GitHub answered 403: Resource not accessible by integration", status=403)


@pytest.mark.parametrize("error,why", [
    (FORBIDDEN, f"set Single file to `{CONFIG_PATH}`"),
    (NotAFile(CONFIG_PATH, "folder"), "is a folder, not a file"),
    (PermanentGitHubError("GitHub answered 451: Repository access blocked", status=451), "451"),
])
def test_a_config_github_will_not_give_holds_the_repository_and_says_how_to_fix_it(sessions, caplog, error, why):
    github = refusing({REPO: error})
    with caplog.at_level(logging.WARNING, logger="bot.labeling.gather"):
        outcome, applied, reason = label(sessions, github, 1)
    assert (outcome, applied, github.writes()) == ("held", None, [])
    assert reason.startswith(f"{REPO}/{CONFIG_PATH} cannot be read, so nothing is applied until it can")
    assert why in reason
    assert predictions(sessions)[0].outcome == "held"
    assert any("applies nothing on this repository" in record.getMessage() and why in record.getMessage()
               for record in caplog.records)


def test_the_organisations_file_refused_holds_the_repository_too(sessions):
    """No file in the repository, and the organisation's `.github` one refused: its maintainers meant one."""
    github = refusing({"octo/.github": FORBIDDEN})
    assert label(sessions, github, 1)[0] == "held"
    assert [call[1] for call in github.calls if call[0] == "get_file"] == [REPO, "octo/.github"]


def test_no_file_anywhere_is_not_held_but_the_defaults(sessions):
    assert label(sessions, repository(), 1)[:2] == ("applied", "bug")
