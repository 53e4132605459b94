"""Reviews between the click and the worker: "queued" while the job waits, then what it concluded.

The web process marks a prediction queued (at most one review at a time each); the feedback worker's job
replaces the mark with its outcome, which the page shows until the decision itself is in the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from redis import Redis

QUEUED_TTL = 3600  # seconds; a mark whose job died without finishing stops blocking new clicks
RESULT_TTL = 86400  # seconds the job's outcome stays on the page
_PREFIX = "issue-sorter:review"


def mark_queued(redis: Redis, prediction_id: int, review: dict) -> bool:
    """Mark the prediction queued; False when another review of it is queued already."""
    return bool(redis.set(f"{_PREFIX}:queued:{prediction_id}", json.dumps(review), nx=True, ex=QUEUED_TTL))


def unmark(redis: Redis, prediction_id: int) -> None:
    redis.delete(f"{_PREFIX}:queued:{prediction_id}")


def finish(redis: Redis, prediction_id: int, outcome: str) -> None:
    """The job is done with this prediction: keep its outcome, drop the queued mark."""
    pipeline = redis.pipeline()
    pipeline.set(f"{_PREFIX}:result:{prediction_id}", outcome, ex=RESULT_TTL)
    pipeline.delete(f"{_PREFIX}:queued:{prediction_id}")
    pipeline.execute()


def states(redis: Redis, prediction_ids: Iterable[int]) -> dict[int, dict]:
    """{prediction id: {"queued": review} or {"result": outcome}} for those with either."""
    ids = list(prediction_ids)
    if not ids:
        return {}
    queued = redis.mget([f"{_PREFIX}:queued:{i}" for i in ids])
    results = redis.mget([f"{_PREFIX}:result:{i}" for i in ids])
    found: dict[int, dict] = {}
    for prediction_id, mark, result in zip(ids, queued, results):
        if mark is not None:
            found[prediction_id] = {"queued": json.loads(mark)}
        elif result is not None:
            found[prediction_id] = {"result": result.decode()}
    return found
