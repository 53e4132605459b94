"""TrainingContext: what the training worker builds once and every training job reads.

No serving model and no GitHub client: the training worker trains, evaluates and promotes, and hands
anything meant for GitHub back to the bot's queue (core.queues.REPLY_TO_RETRAIN).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis
from sqlalchemy.orm import Session, sessionmaker

from core.settings import Settings
from core.worker_context import ContextSlot


@dataclass
class TrainingContext:
    settings: Settings
    sessionmaker: sessionmaker[Session]
    redis: Redis


_slot: ContextSlot[TrainingContext] = ContextSlot("TrainingContext", "issue-sorter training-worker")
configure, current = _slot.configure, _slot.current
