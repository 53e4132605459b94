"""WorkerContext: the services a bot worker process builds once and every job reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from redis import Redis
from sqlalchemy.orm import Session, sessionmaker

from bot.github_api.client import PermanentGitHubError
from bot.labeling.serving import ServingModels
from core.inference_slots import InferenceSlots
from core.settings import Settings
from core.worker_context import ContextSlot


@dataclass
class WorkerContext:
    settings: Settings
    sessionmaker: sessionmaker[Session]
    models: ServingModels  # loaded once per process, refreshed when the registry switches
    github_for: Callable[[int], object] | None  # installation id → IssueWriter; None in dry-run
    redis: Redis
    github_app: object | None = None  # the App itself (bot.intake.redelivery.HookDeliveries); None in dry-run
    retry_base_seconds: float = 30.0  # first back-off after a transient GitHub error; doubles each time
    max_attempts: int = 6  # transient errors after this many tries are given up (and logged)
    backfill_max_issues: int = 1000  # labelled issues read per repository on installation
    # machine-wide model passes at once (core.inference_slots); tests and dry-run: no limit
    inference_slots: InferenceSlots = field(default_factory=lambda: InferenceSlots(0))

    def github(self, installation_id: int | None):
        """The IssueWriter acting as this installation; None in dry-run."""
        if self.github_for is None:
            return None
        if not installation_id:
            raise PermanentGitHubError("the delivery names no installation", status=None)
        return self.github_for(installation_id)


_slot: ContextSlot[WorkerContext] = ContextSlot("WorkerContext", "issue-sorter worker")
configure, current = _slot.configure, _slot.current
