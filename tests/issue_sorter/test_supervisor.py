"""The supervisor of `issue-sorter run`: a child that exits is restarted with back-off and said; on
shutdown the first group stops before Redis; the embedded Redis comes back with its queued jobs."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import time

import pytest
from redis import Redis

from core.queues import LABELING_QUEUE, make_queue
from issue_sorter import run
from issue_sorter.supervisor import Child, backoff, stop_in_order


def _python(code: str) -> functools.partial:
    return functools.partial(subprocess.Popen, [sys.executable, "-c", code], start_new_session=True)


def test_backoff_doubles_to_half_a_minute():
    assert [backoff(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]


@pytest.mark.e2e  # supervises real Python processes
def test_a_crashed_child_is_restarted_after_its_backoff_and_said():
    said: list[str] = []
    child = Child("worker", _python("import sys; sys.exit(3)"))
    child.launch(0.0)
    child.process.wait()
    child.check(1.0, said.append)  # exited 1 s after start: a quick crash, 1 s back-off
    assert said == [f"worker (pid {child.process.pid}) exited with code 3; restarting it in 1 s"]
    first = child.process
    child.check(1.5, said.append)
    assert child.process is first  # still backing off
    child.check(2.0, said.append)
    assert child.process is not first and child.restarts == 1 and said[-1].startswith("worker restarted (pid")
    child.process.wait()
    child.check(3.0, said.append)  # crashed again at once: the back-off doubles
    assert said[-1].endswith("restarting it in 2 s")
    child.check(5.0, said.append)
    child.process.wait()
    child.check(5.0 + 61, said.append)  # it had run for a minute: the back-off starts over
    assert said[-1].endswith("restarting it in 1 s")
    child.check(5.0 + 62, said.append)
    stop_in_order([child])


@pytest.mark.e2e  # supervises real Python processes
def test_shutdown_stops_the_workers_first_and_redis_last(tmp_path):
    order = tmp_path / "order"
    stops = ("import signal, sys, time\n"
             "def stop(*_):\n"
             "    time.sleep({pause}); open({path!r}, 'a').write({name!r}); sys.exit(0)\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             "open({path!r} + '.{name}', 'w').close()\n"
             "while True: time.sleep(1)\n")
    redis = Child("redis", _python(stops.format(pause=0, path=str(order), name="redis")), stop_group=1)
    worker = Child("worker", _python(stops.format(pause=0.5, path=str(order), name="worker")))
    for child in (redis, worker):
        child.launch(time.monotonic())
    deadline = time.monotonic() + 10
    while not all((tmp_path / f"order.{n}").exists() for n in ("redis", "worker")) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop_in_order([redis, worker])
    assert order.read_text() == "workerredis"  # the slow worker finished before Redis was asked to stop


@pytest.mark.e2e  # the embedded Redis server, SIGKILLed and restarted
def test_the_embedded_redis_restarts_with_every_queued_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run.VAR is relative: var/ here
    (tmp_path / "var").mkdir()
    environ: dict[str, str] = {}
    with run._local_redis(environ) as child:
        connection = Redis.from_url(environ["REDIS_URL"])
        queue = make_queue(connection, LABELING_QUEUE)
        ids = [queue.enqueue("bot.jobs.label_issue", kwargs={"n": n}).id for n in range(50)]
        child.process.send_signal(signal.SIGKILL)  # a crash, not a clean shutdown: nothing gets flushed
        child.process.wait()
        said: list[str] = []
        child.check(time.monotonic(), said.append)
        child.check(time.monotonic() + 2, said.append)
        assert said[0].startswith("redis (pid") and "code -9" in said[0] and said[1].startswith("redis restarted")
        assert Redis.from_url(environ["REDIS_URL"]).ping()
        assert make_queue(Redis.from_url(environ["REDIS_URL"]), LABELING_QUEUE).job_ids == ids
    assert child.process.poll() is not None  # stopped on the way out
