"""README.md's quick start, as a newcomer runs it: in a fresh clone, every command of "Quick start on a laptop"
that needs no GitHub, in the order written, each of them succeeding; `make run` until it says it is up (in
dry-run mode: no App is registered) and its health check answers, then stopped. The first model trains on a
small labelled file (ISSUE_SORTER_BOOTSTRAP_DATA, which README names for offline use) so it takes minutes, not
the hub's download. It creates a virtual environment from the lock: several minutes."""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from issue_sorter.run import READY_LINE
from tests.ports import free_port
from tests.paths import NLBSE, REPO_ROOT
from trainer.dataset import load_file

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
NEEDS_GITHUB = {"setup"}  # `issue-sorter setup` registers an App on GitHub: the quick start's one such command


def quick_start_commands() -> list[str]:
    """The commands of README.md's laptop quick start, comments dropped, in order."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Quick start on a laptop", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)
    return [re.split(r"\s{2,}#", line)[0].strip() for line in block.splitlines() if line.strip()]


def small_training_file(path) -> None:
    picked = []
    examples = load_file(NLBSE / "issues_train.csv")
    for label in ("bug", "feature", "question"):
        picked += [example for example in examples if example.label == label][:20]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["title", "body", "label"])
        writer.writerows([example.title, example.body[:2000], example.label] for example in picked)


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_the_readmes_quick_start_runs_in_a_fresh_clone_in_the_order_written(tmp_path):
    commands = quick_start_commands()
    needing_github = [command for command in commands if shlex.split(command)[-1:] and
                      any(word in NEEDS_GITHUB for word in shlex.split(command)[1:2])]
    assert [shlex.split(command)[1] for command in needing_github] == sorted(NEEDS_GITHUB)
    assert commands[0] == "make install" and commands[-1] == "make run"
    clone = tmp_path / "issue-sorter"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True, timeout=120)
    small_training_file(tmp_path / "issues.csv")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GITHUB_", "ISSUE_SORTER_", "DATABASE_URL", "REDIS_URL", "MODEL_DIR", "VIRTUAL_ENV",
                                  "PYTHONPATH"))}
    env |= {"ISSUE_SORTER_BOOTSTRAP_DATA": str(tmp_path / "issues.csv"), "HF_HUB_OFFLINE": "1",
            "PORT": str(free_port())}
    for command in commands[:-1]:
        if command in needing_github:
            continue
        done = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, f"{command}:\n{(done.stdout + done.stderr)[-3000:]}"
        if " predict " in command:
            assert "threshold in force" in done.stdout and "kind " in done.stdout, done.stdout
        if " check-config " in command:
            assert "no problem" in done.stdout.splitlines()[0], done.stdout
    log = tmp_path / "run.log"
    with log.open("w") as output:
        make_run = subprocess.Popen(shlex.split(commands[-1]), cwd=clone, env=env, stdout=output,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while READY_LINE not in log.read_text() and make_run.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
        assert READY_LINE in log.read_text(), log.read_text()[-3000:]
        assert "DRY-RUN" in log.read_text()  # no App registered: it classifies, stores, and writes nothing
        assert requests.get(f"http://127.0.0.1:{env['PORT']}/healthz", timeout=10).status_code == 200
        # Ctrl-C's SIGTERM to `issue-sorter run`, make's child: it stops its processes and exits 0, and so make
        (child,) = (Path(f"/proc/{make_run.pid}/task/{make_run.pid}/children").read_text().split())
        os.kill(int(child), signal.SIGTERM)
        code = make_run.wait(timeout=120)
    finally:
        if make_run.poll() is None:
            os.killpg(make_run.pid, signal.SIGKILL)
    assert code == 0, log.read_text()[-3000:]
