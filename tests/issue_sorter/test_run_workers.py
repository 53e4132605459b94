"""`issue-sorter run` starts ISSUE_SORTER_LABELLING_WORKERS labelling workers, each supervised on its own."""

from __future__ import annotations

import subprocess

import pytest

from core.settings import ConfigError, Settings
from issue_sorter import run


class Started:
    """What subprocess.Popen was asked to start; `true` is started instead."""

    def __init__(self):
        self.commands: list[list[str]] = []
        self.popen = subprocess.Popen

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        return self.popen(["true"])


@pytest.mark.e2e  # starts `true` for each of run's processes
def test_run_starts_the_labelling_workers_the_setting_asks_for(monkeypatch):
    started = Started()
    monkeypatch.setattr(run.subprocess, "Popen", started)
    children = run._start_processes({}, None, labelling_workers=3)
    names = [child.name for child in children]
    assert names == ["web", "worker", "worker-2", "worker-3", "feedback-worker", "trainer", "cron"]
    labelling = [c for c in started.commands if c[-2:] == ["--queues", "labeling"]]
    assert len(labelling) == 3  # one queue each: RQ hands a killed worker's job back only then
    for child in children:
        child.process.wait()


def test_the_labelling_workers_setting_is_at_least_one():
    def read(environ):
        return Settings.from_env(environ, require_webhook_secret=False)

    assert read({"ISSUE_SORTER_LABELLING_WORKERS": "4"}).labelling_workers == 4
    assert read({}).labelling_workers == 1
    with pytest.raises(ConfigError, match="ISSUE_SORTER_LABELLING_WORKERS"):
        read({"ISSUE_SORTER_LABELLING_WORKERS": "0"})
