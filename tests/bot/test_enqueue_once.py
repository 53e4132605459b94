"""enqueue_once when Redis dies in the middle of it: no marker without its job, so the delivery comes back."""

from __future__ import annotations

import pytest
from redis.client import Pipeline, Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import WatchError

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


def test_a_connection_broken_mid_transaction_is_an_error_not_a_duplicate(redis, monkeypatch):
    """redis-py raises WatchError when the connection dies while a key is watched, as it does when a
    concurrent request changed the key. chaos run 8 lost a delivery answered 202 that way."""
    def broken(self, *_args, **_kwargs):
        self.reset()
        raise WatchError("A ConnectionError occurred while watching one or more keys")

    with monkeypatch.context() as patched:
        patched.setattr(Pipeline, "execute", broken)
        with pytest.raises(RedisConnectionError, match="broke while queueing"):
            queueing.enqueue_once(redis, LABEL_ISSUE, "d-2", KWARGS, body_sha256="b" * 64)
    assert make_queue(redis, LABELING_QUEUE).count == 0  # the receiver answers 503: the sweep asks again

    assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-2", KWARGS, body_sha256="b" * 64) is True


def test_a_delivery_queued_by_a_concurrent_request_is_not_queued_twice(redis, monkeypatch):
    def the_other_request_won(self, *_args, **_kwargs):
        self.reset()
        redis.set(queueing.DELIVERY_KEY.format("d-3"), LABELING_QUEUE)
        raise WatchError("Watched variable changed.")

    with monkeypatch.context() as patched:
        patched.setattr(Pipeline, "execute", the_other_request_won)
        assert queueing.enqueue_once(redis, LABEL_ISSUE, "d-3", KWARGS) is False
