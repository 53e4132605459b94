"""Quotas per installation: what one installation's repositories may take of the machine's models,
trainings, feedback queue and workers' memory, so that one with fifty repositories cannot crowd out the rest.

A quota refuses nothing for good: a training over it stays due and runs on a later due-retraining run, a
memory fill over it waits its installation's turn, and a model pushed out of a worker's memory is read again
from disk when it serves next. An installation is one GitHub account, so a repository's owner names it.
"""

from __future__ import annotations

import dataclasses

from core.settings import Settings


@dataclasses.dataclass(frozen=True)
class Quotas:
    """The caps, sized for a 2-core machine by default (ISSUE_SORTER_MAX_*; docs/CONFIG.md)."""

    repository_models: int = 5  # repositories of one installation with a model of their own
    trainings_per_day: int = 3  # trainings of one installation's repositories in any 24 hours
    queued_memory_fills: int = 2  # memory fills of one installation waiting in the feedback queue at once
    loaded_models: int = 3  # models one labelling worker keeps in memory; the least recently used leaves

    @classmethod
    def from_settings(cls, settings: Settings) -> Quotas:
        return cls(repository_models=settings.max_repository_models,
                   trainings_per_day=settings.max_trainings_per_day,
                   queued_memory_fills=settings.max_queued_memory_fills,
                   loaded_models=settings.max_loaded_models)


def installation_of(repo: str) -> str:
    """The account a repository belongs to: a GitHub App has one installation per account."""
    return repo.partition("/")[0].lower()
