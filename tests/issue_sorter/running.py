"""`issue-sorter run` as a user starts it, in a folder of its own: for the end-to-end tests, and for the
service benchmarks (bench.service prepares what it runs against)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import requests

from bot.intake.signatures import sign_body
from issue_sorter.run import READY_LINE, REDIS_PASSWORD_FILE, REDIS_USER

METRICS_TOKEN = "the-tests-metrics-token"  # /healthz says dry-run mode only to its bearer


class Service:
    """`issue-sorter run` in `workdir`, its log in run.log; stopped (SIGTERM) when its `with` ends."""

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.workdir, self.env = workdir, env
        self.base = f"http://127.0.0.1:{env['PORT']}"
        self.log_path, self.started_at = workdir / "run.log", time.time()
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "issue_sorter.cli", "run"], cwd=workdir, env=env,
                                            stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def wait_healthy(self, seconds: float = 300, *, dry_run: bool | None = None) -> float:
        """Until the service says it is up (READY_LINE: the labelling workers warmed up, which a web server
        answering /healthz says nothing of) and /healthz sees the database and Redis (and, given `dry_run`, says
        that mode to ISSUE_SORTER_METRICS_TOKEN's bearer); when (time.time())."""
        token = self.env.get("ISSUE_SORTER_METRICS_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit("issue-sorter run exited:\n" + self.log()[-3000:])
            with contextlib.suppress(requests.RequestException, ValueError):
                health = requests.get(f"{self.base}/healthz", timeout=1, headers=headers).json()
                if (health.get("database") == health.get("redis") == "ok" and READY_LINE in self.log()
                        and (dry_run is None or health.get("dry_run") is dry_run)):
                    return time.time()
            time.sleep(0.3)
        raise SystemExit("issue-sorter run did not come up:\n" + self.log()[-3000:])

    def log(self) -> str:
        return self.log_path.read_text()

    def redis_url(self) -> str:
        """REDIS_URL when given, else the embedded Redis's: its port from the log, its password from the file
        `run` keeps it in (a URL with the password never reaches a log)."""
        if self.env.get("REDIS_URL"):
            return self.env["REDIS_URL"]
        port = re.search(r"listening on 127\.0\.0\.1:(\d+),", self.log()).group(1)
        password = (self.workdir / REDIS_PASSWORD_FILE).read_text().strip()
        return f"redis://{REDIS_USER}:{password}@127.0.0.1:{port}/0"

    def child_pids(self, pattern: str) -> list[int]:
        """The pids of the supervisor's children whose command line matches `pattern` (workers, Redis)."""
        out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], check=True, capture_output=True, text=True)
        lines = (line.split(None, 2) for line in out.stdout.splitlines())
        return sorted(int(pid) for pid, ppid, args in lines
                      if int(ppid) == self.process.pid and re.search(pattern, args))

    def stop(self) -> int:
        """SIGTERM, as an operator stops it; its exit code (-9: killed after 90 s)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -9


@contextlib.contextmanager
def running_service(cwd: Path, env: dict[str, str], *, dry_run: bool = False) -> Iterator[str]:
    """The service's base URL once /healthz says it is up and it has said it is ready (its labelling workers
    warmed up), as a user waits for it; stopped with SIGTERM, which must exit 0."""
    env = {"ISSUE_SORTER_MAX_EVENT_AGE": "0", "ISSUE_SORTER_METRICS_TOKEN": METRICS_TOKEN,  # full /healthz
           **env}  # the payloads are GitHub's examples, dated 2019
    service = Service(cwd, env)
    try:
        service.wait_healthy(90, dry_run=dry_run)
        yield service.base
    finally:
        code = service.stop()
    assert code == 0, service.log()[-3000:]


def deliver(base: str, event: str, payload: dict, delivery: str, secret: str) -> requests.Response:
    body = json.dumps(payload).encode()
    return requests.post(f"{base}/webhook", data=body, timeout=10, headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json",
        "X-Hub-Signature-256": sign_body(body, secret)})


def wait_for(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    return bool(condition())
