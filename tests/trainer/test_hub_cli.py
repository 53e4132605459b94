"""What a user sees of the hub at the command line, in a process of its own as they run it: a progress
line per file, one error line naming the file and the fix, no line per HTTP request, no warning twice."""

import os
import subprocess
import sys

import pytest

from tests.trainer.test_hub_data import ALL_REPOS, publish_dataset
from trainer.dataset import HUB_PATH

pytestmark = pytest.mark.e2e  # `issue-sorter` in a process of its own


def test_bootstrap_from_the_hub_says_which_file_it_reads_and_stops_in_one_line(hub, tmp_path):
    missing = "facebook/react"
    publish_dataset(hub, repos=[repo for repo in ALL_REPOS if repo != missing])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISSUE_SORTER_BOOTSTRAP")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.db'}", MODEL_DIR=str(tmp_path / "models"),
               ISSUE_SORTER_SHARED=str(tmp_path / "none"))  # HF_ENDPOINT and HF_HOME: set by the fixture
    cli = [sys.executable, "-m", "issue_sorter.cli"]
    subprocess.run(cli + ["migrate"], env=env, check=True, capture_output=True)
    result = subprocess.run(cli + ["bootstrap-model", "--data", "hub"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1, result.stderr
    number = ALL_REPOS.index(missing) + 1
    assert result.stdout.splitlines()[-1] == f"hub: {missing} ({number} of 13)"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and HUB_PATH.format(repo=missing) in errors[0] and "--data FILE" in errors[0]
    assert "Traceback" not in result.stderr and "HTTP Request" not in result.stderr
    warnings = [line.split(" ", 2)[-1] for line in result.stderr.splitlines() if "WARNING" in line]
    assert warnings and len(warnings) == len(set(warnings)), result.stderr  # each repository's skips once
