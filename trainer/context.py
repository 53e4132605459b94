"""TrainingContext: what the training worker builds once and every training job reads.

No serving model and no GitHub client: the training worker trains, evaluates and promotes, and hands
anything meant for GitHub back to the bot's queue (core.queues.REPLY_TO_RETRAIN).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis
from sqlalchemy.orm import Session, sessionmaker

from core.settings import Settings


@dataclass
class TrainingContext:
    settings: Settings
    sessionmaker: sessionmaker[Session]
    redis: Redis


_current: TrainingContext | None = None


def configure(context: TrainingContext | None) -> None:
    """Install the context training jobs read; called once by the training worker (and by tests)."""
    global _current
    _current = context


def current() -> TrainingContext:
    if _current is None:
        raise RuntimeError("no TrainingContext: start training jobs through `issue-sorter training-worker`")
    return _current
