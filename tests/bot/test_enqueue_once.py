"""enqueue_once when Redis dies in the middle of it: no marker without its job, so the delivery comes back."""

from __future__ import annotations

import pytest
from redis.client import Pipeline, Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from bot import queueing
from core.queues import LABEL_ISSUE, LABELING_QUEUE, make_queue

pytestmark = pytest.mark.redis
KWARGS = {"delivery_id": "d-1", "installation_id": 1, "repo": "o/r", "number": 1, "action": "opened",
          "snapshot": {}}


def test_redis_dying_before_the_job_is_written_leaves_no_marker(redis, monkeypatch):
    def gone(*_args, **_kwargs):
        raise RedisConnectionError("Connection closed by server.")

    with monkeypatch.context() as patched:  # from here Redis takes no more writes, deletes included
        patched.setattr(Pipeline, "execute", gone)
        patched.setattr(Redis, "delete", gone)
        with pytest.raises(RedisConnectionError):
            queueing.enqueue_once(redis, LABEL_ISSUE, "d-1", KWARGS)
    assert redis.exists(queueing.DELIVERY_KEY.format("d-1")) == 0  # the sweep will ask for it again
    assert make_queue(redis, LABELING_QUEUE).count == 0

    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-1", KWARGS) is True  # and its redelivery is queued
    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-1", KWARGS) is False  # once
    assert make_queue(redis, LABELING_QUEUE).job_ids == ["label_issue--d-1"]
