"""GET /healthz with the metrics token says, per queue, whether a live worker serving it has loaded and warmed
up its model (what `issue-sorter run` waits for before it says the service is up); a stranger still learns
only whether the database and Redis answer."""

import pytest
from rq import SimpleWorker

from core import engines
from core.queues import SERIALIZER

TOKEN = "the-operators-metrics-token"
pytestmark = [pytest.mark.redis, pytest.mark.settings(metrics_token=TOKEN)]
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def live_worker(redis):
    """A labelling worker with a heartbeat, not yet warmed up; it dies after the test."""
    worker = SimpleWorker(["labeling"], connection=redis, serializer=SERIALIZER)
    worker.register_birth()
    worker.heartbeat()
    yield worker
    worker.register_death()


def test_healthz_says_a_queue_is_warmed_up_only_once_a_live_worker_of_it_has_warmed_its_model(
        client, redis, live_worker):
    health = client.get("/healthz", headers=BEARER).json
    assert health["workers"]["labeling"] is True and health["warmed_up"]["labeling"] is False
    engines.record_warmed(redis, 412.0, process=f"{live_worker.hostname}:{live_worker.pid}")
    warmed = client.get("/healthz", headers=BEARER).json["warmed_up"]
    assert warmed == {"labeling": True, "feedback": False, "training": False}


def test_a_warm_up_recorded_by_a_worker_that_is_gone_does_not_count(client, redis, live_worker):
    engines.record_warmed(redis, 380.0, process="another-host:4242")  # no heartbeat of that process
    assert client.get("/healthz", headers=BEARER).json["warmed_up"]["labeling"] is False


def test_a_stranger_is_not_told_about_workers(client, redis, live_worker):
    engines.record_warmed(redis, 412.0, process=f"{live_worker.hostname}:{live_worker.pid}")
    assert client.get("/healthz").json == {"database": "ok", "redis": "ok"}
