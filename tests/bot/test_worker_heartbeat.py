"""A busy labelling worker's bookkeeping in Redis: RQ 3.0 sent the worker's heartbeat three times a job, each
as three commands, and its idle state twice; the ServingWorker sends one of each where they fall together,
and still shows in Redis as alive and in the state it is in (what `rq info`, rq-dashboard and RQ's own
cleanup read)."""

import pytest
from redis.connection import Connection
from rq import Queue, Worker, get_current_job

from bot.worker import HEARTBEAT_GAP_SECONDS, ServingWorker
from core.abandoned import MAINTENANCE_INTERVAL, WORKER_TTL

pytestmark = pytest.mark.redis
SEEN: list[dict] = []


def look_at_the_worker() -> None:
    """A job that records what Redis says of the worker running it."""
    job = get_current_job()
    redis, key = job.connection, f"rq:worker:{job.worker_name}"
    SEEN.append({"ttl": redis.ttl(key), "state": redis.hget(key, "state"),
                 "listed": job.worker_name in {worker.name for worker in Worker.all(connection=redis)}})


def serving_worker(redis) -> ServingWorker:
    return ServingWorker(["labeling"], connection=redis, warm_up=lambda: None,
                         maintenance_interval=MAINTENANCE_INTERVAL, worker_ttl=WORKER_TTL)


@pytest.fixture
def sent(monkeypatch):
    """Every command (or pipeline) this process sends to Redis: one entry per round trip."""
    commands: list[bytes] = []
    send = Connection.send_packed_command

    def counting(self, command, check_health=True):
        commands.append(command if isinstance(command, bytes | bytearray) else b"".join(command))
        return send(self, command, check_health)

    monkeypatch.setattr(Connection, "send_packed_command", counting)
    return commands


def test_a_busy_worker_stays_registered_alive_and_busy_through_every_job(redis):
    SEEN.clear()
    queue = Queue("labeling", connection=redis)
    for _ in range(20):
        queue.enqueue(look_at_the_worker)
    worker = serving_worker(redis)

    worker.work(burst=True, with_scheduler=False)

    assert len(SEEN) == 20
    assert all(seen["listed"] and seen["state"] == b"busy" for seen in SEEN)
    assert all(seen["ttl"] > WORKER_TTL for seen in SEEN)  # its key outlives the wait for the next job


def test_a_busy_queue_costs_the_worker_about_half_the_round_trips_rq_sends(redis, sent):
    """RQ 3.0's SimpleWorker: 20 round trips a job on a busy queue, 9 of them heartbeats."""
    queue = Queue("labeling", connection=redis)
    for _ in range(41):
        queue.enqueue(len, "abc")
    worker = serving_worker(redis)
    worker.work(burst=True, with_scheduler=False, max_jobs=1)  # birth, registries: not a job's cost
    sent.clear()

    worker.work(burst=True, with_scheduler=False, max_jobs=40)

    assert len(sent) / 40 <= 12
    assert sum(command.split(b"\r\n")[2] == b"EXPIRE" for command in sent) / 40 <= 2  # in the pipelines


def test_a_heartbeat_goes_out_once_the_gap_has_passed_and_keeps_the_worker_alive(redis):
    worker = serving_worker(redis)
    worker.register_birth()
    worker.heartbeat()
    redis.persist(worker.key)  # so that a heartbeat skipped shows: the key would keep no TTL

    worker.heartbeat()  # at once: the one just sent stands for it
    assert redis.ttl(worker.key) == -1

    worker._heartbeat_sent -= HEARTBEAT_GAP_SECONDS  # as if it had been sent the gap ago
    worker.heartbeat()
    assert WORKER_TTL < redis.ttl(worker.key) <= WORKER_TTL + 60
    assert redis.hget(worker.key, "last_heartbeat") is not None


def test_a_state_is_written_again_once_the_gap_has_passed_or_after_another_state(redis):
    worker = serving_worker(redis)
    worker.register_birth()
    worker.set_state("idle")
    redis.hset(worker.key, "state", "stale")  # so that a write skipped shows

    worker.set_state("idle")
    assert redis.hget(worker.key, "state") == b"stale"
    assert worker.get_state() == "idle"

    worker._state_sent = ("idle", worker._state_sent[1] - HEARTBEAT_GAP_SECONDS)
    worker.set_state("idle")
    assert redis.hget(worker.key, "state") == b"idle"

    worker.set_state("busy")
    worker.set_state("idle")
    assert redis.hget(worker.key, "state") == b"idle"


def test_a_state_set_in_a_pipeline_is_not_taken_as_written(redis):
    """RQ discards a pipeline on WATCH errors: what it set may never have reached Redis."""
    worker = serving_worker(redis)
    worker.register_birth()
    with redis.pipeline() as pipeline:
        worker.set_state("idle", pipeline=pipeline)
        pipeline.reset()  # discarded

    worker.set_state("idle")
    assert redis.hget(worker.key, "state") == b"idle"
