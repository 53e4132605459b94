"""`issue-sorter run` as a user starts it, in a folder of its own, for the end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.intake.signatures import sign_body
from issue_sorter.run import READY_LINE

METRICS_TOKEN = "the-tests-metrics-token"  # /healthz says dry-run mode only to its bearer


@contextlib.contextmanager
def running_service(cwd: Path, env: dict[str, str], *, dry_run: bool = False) -> Iterator[str]:
    """The service's base URL once /healthz says it is up and it has said it is ready (its labelling workers
    warmed up), as a user waits for it; stopped with SIGTERM, which must exit 0."""
    log_path = cwd / "run.log"
    env = {"ISSUE_SORTER_MAX_EVENT_AGE": "0", "ISSUE_SORTER_METRICS_TOKEN": METRICS_TOKEN,  # full /healthz
           **env}  # the payloads are GitHub's examples, dated 2019
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "issue_sorter.cli", "run"], cwd=cwd, env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{env['PORT']}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                health = requests.get(f"{base}/healthz", timeout=1,
                                      headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).json()
                if (health["database"] == "ok" and health["redis"] == "ok" and health["dry_run"] is dry_run
                        and READY_LINE in log_path.read_text()):
                    break
            except (requests.RequestException, ValueError, KeyError):
                pass
            time.sleep(0.3)
        else:
            pytest.fail("run did not come up:\n" + log_path.read_text()[-3000:])
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    assert code == 0, log_path.read_text()[-3000:]


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
