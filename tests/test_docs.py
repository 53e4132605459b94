"""The documents a maintainer reads first: README.md short and for the people who install it (the two set-up
commands first, no dated figures: those live in docs/BENCHMARKS.md), and every relative link in the docs that
point at one another resolving to a file of the repository."""

from __future__ import annotations

import re

import pytest

from tests.paths import REPO_ROOT

DOCUMENTS = ["README.md", "CONTRIBUTING.md", "docs/CONFIG.md", "docs/OPERATIONS.md", "docs/SECURITY.md",
             "docs/ARCHITECTURE.md"]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme.startswith("```sh\nmake run     # the service on embedded defaults: SQLite, a local Redis, the web server, "
                             "RQ workers, RQ cron\nmake test    # the whole test suite (needs the local Redis and "
                             "PostgreSQL; see \"Tests\")\n```\n")
    assert len(readme.splitlines()) <= 250 and "\n## Tests\n" in readme
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", readme)  # dated measurements belong in docs/BENCHMARKS.md
    assert not re.search(r"\b\d+(\.\d+)? ?(ms|minutes) (on|for) ", readme)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_relative_link_resolves(document):
    path = REPO_ROOT / document
    for target in LINK.findall(path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{document} links {target}, which is not there"
