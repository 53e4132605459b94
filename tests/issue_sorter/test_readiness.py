"""`issue-sorter run` says the service is up only once the web server answers and every labelling worker has
loaded and warmed up its model (issue_sorter.readiness): the first issue after "ready" pays for neither. Past
the timeout it says what it still waits for, and keeps waiting."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from core import engines
from issue_sorter.healthcheck import web_answers
from issue_sorter.readiness import Readiness, warmed_processes
from issue_sorter.supervisor import Child, supervise


def worker(name: str, pid: int) -> Child:
    """A labelling worker as the supervisor holds it; only its pid is read."""
    return Child(name, start=lambda: None, process=SimpleNamespace(pid=pid))


class Service:
    """What readiness looks at, set by each test: whether /healthz answers, which processes warmed up."""

    def __init__(self, *workers: Child):
        self.workers, self.web, self.warm, self.said, self.announced = list(workers), False, set(), [], 0

    def readiness(self, timeout: float = 60.0) -> Readiness:
        return Readiness(self.workers, lambda: self.warm, lambda: self.web, self.announce, self.said.append,
                         started=100.0, timeout=timeout)

    def announce(self) -> None:
        self.announced += 1

    def warmed(self, pid: int) -> None:
        self.warm.add(engines.process_name(pid))


def test_ready_only_once_the_web_answers_and_every_labelling_worker_warmed_up():
    service = Service(worker("worker", 11), worker("worker-2", 12))
    readiness = service.readiness()
    readiness.tick(101.0)
    assert readiness.missing() == ["the web server to answer /healthz",
                                   "worker (pid 11) to load and warm up its model",
                                   "worker-2 (pid 12) to load and warm up its model"]
    service.web = True
    service.warmed(11)
    readiness.tick(102.0)
    assert service.announced == 0 and readiness.missing() == ["worker-2 (pid 12) to load and warm up its model"]
    service.warmed(12)
    readiness.tick(106.5)
    assert service.announced == 1 and readiness.ready_at == 106.5
    assert service.said == [("ready in 6.5 s: the web server answers and the labelling workers' models are loaded "
                             "and warmed up (2 of 2)")]
    readiness.tick(110.0)
    assert service.announced == 1 and len(service.said) == 1  # said once


def test_a_worker_restarted_while_starting_must_warm_up_again_under_its_new_pid():
    restarted = worker("worker", 21)
    service = Service(restarted)
    service.web = True
    service.warmed(21)
    restarted.process = SimpleNamespace(pid=22)  # the supervisor started it again
    readiness = service.readiness()
    readiness.tick(101.0)
    assert service.announced == 0 and readiness.missing() == ["worker (pid 22) to load and warm up its model"]
    service.warmed(22)
    readiness.tick(102.0)
    assert service.announced == 1


def test_past_the_timeout_it_says_once_what_is_missing_and_announces_when_ready_later():
    service = Service(worker("worker", 31))
    service.web = True
    readiness = service.readiness(timeout=30.0)
    readiness.tick(120.0)
    assert service.said == []
    readiness.tick(130.0)
    readiness.tick(140.0)
    assert service.said == [("not ready after 30 s, still waiting for: worker (pid 31) to load and warm up its model. "
                             "The service keeps running and queues deliveries; the workers' lines above say what "
                             "holds them")]
    service.warmed(31)
    readiness.tick(150.0)
    assert service.announced == 1 and service.said[-1].startswith("ready in 50.0 s")


def test_redis_not_answering_is_what_it_says_it_waits_for():
    service = Service(worker("worker", 41))
    service.web = True
    readiness = Readiness(service.workers, lambda: None, lambda: True, service.announce, service.said.append,
                          started=0.0)
    assert readiness.missing() == ["Redis to answer (the workers record their warm-up there)"]


def test_it_reads_the_warm_ups_the_workers_record_in_redis(redis):
    engines.record_warmed(redis, 512.0, process=engines.process_name(51))
    assert warmed_processes(redis) == {f"{socket.gethostname()}:51"}
    engines.record_warmed(redis, 1.0)
    assert engines.process_name() in warmed_processes(redis)


@pytest.mark.e2e  # the supervisor supervises a real process
def test_the_supervisor_runs_the_readiness_check_between_its_looks_at_the_children():
    ticks: list[float] = []
    child = Child("sleeper", lambda: subprocess.Popen(["sleep", "30"], start_new_session=True))
    child.launch(time.monotonic())
    stopper = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
    stopper.start()
    try:
        assert supervise([child], poll=0.05, on_tick=ticks.append) == 0
    finally:
        stopper.cancel()
    assert len(ticks) >= 3 and ticks == sorted(ticks)
    assert child.process.poll() is not None  # stopped with the rest


def test_the_web_server_counts_as_answering_only_with_a_200():
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/healthz" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        assert web_answers(f"{base}/healthz") is True
        assert web_answers(f"{base}/starting") is False
    finally:
        server.shutdown()
        server.server_close()
    assert web_answers(f"{base}/healthz", timeout=0.5) is False  # nothing listens any more
