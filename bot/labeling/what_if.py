"""What the labelling worker would decide for one issue, with nothing stored and nothing written.

The worker's own gather and decide (bot.labeling.gather, bot.labeling.decide) run in a transaction that is
rolled back: the issue's row, thresholds and own-label fits they store are forgotten, and the plan's writes
are only reported. GitHub is not asked: `OfflineRepository` stands in for it with a config file and the
repository's labels given by the caller (`issue-sorter predict`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from sqlalchemy.orm import Session

from bot.github_api.client import RepoFile
from bot.github_api.issues import IssueSnapshot
from bot.labeling.config import CONFIG_PATH
from bot.labeling.decide import LabelingInputs, Plan, decide
from bot.labeling.gather import Sources, gather
from core.classifier import Classifier
from core.settings import Settings

NUMBER = 0  # GitHub numbers issues from 1: this one is never a stored issue's


class OfflineRepository:
    """The reads a labelling job makes of GitHub, answered from what was given; no write is ever asked."""

    def __init__(self, repo: str, config: bytes | None, labels: Sequence[str]):
        self._repo, self._config, self._labels = repo, config, list(labels)

    def get_file(self, repo: str, path: str, *, etag: str | None = None) -> RepoFile | None:
        if repo != self._repo or path != CONFIG_PATH or self._config is None:
            return None
        return RepoFile(sha=f"offline-{hash(self._config) & 0xFFFFFFFF:08x}", size=len(self._config),
                        content=self._config)

    def list_labels(self, repo: str) -> list[str]:
        return list(self._labels)

    def list_issue_types(self, repo: str) -> list[str]:
        return []  # not known offline: `apply: type` finds none and abstains


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """The plan the worker would make, and the inputs it was made from."""

    plan: Plan
    inputs: LabelingInputs
    model: str  # the serving model's version


def what_if(session: Session, repo: str, title: str, body: str, classifier: Classifier, settings: Settings,
            github: OfflineRepository) -> WhatIf:
    """Gather and decide as `bot.jobs.label_issue` does for a new issue of `repo`; the session is rolled back."""
    now = dt.datetime.now(dt.UTC)
    issue = IssueSnapshot(NUMBER, title, body, "open", (), False, None, now, updated_at=now)
    event = {"repo": repo, "number": NUMBER, "installation_id": None, "snapshot": issue.to_job(),
             "received_at": now.isoformat()}
    try:
        gathered = gather(session, event, Sources(settings, github, lambda _: classifier), now=now)
        if isinstance(gathered, str):
            raise ValueError(f"the worker would not decide: {gathered}")
        return WhatIf(decide(gathered.inputs), gathered.inputs, classifier.version)
    finally:
        session.rollback()
