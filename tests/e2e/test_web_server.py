"""The web server as `issue-sorter run` and docker-compose.yml start it, with 20 slow clients connected.

Two sync gunicorn workers published on port 8000, and two connections sending a header byte every
5 s made a signed ping wait 31 s (GitHub gives up after 10 s)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
import yaml

from bot.intake.signatures import sign_body
from issue_sorter.run import WEB_COMMAND
from tests.conftest import WEBHOOK_SECRET
from tests.e2e.test_service import _healthy, wait_until
from tests.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.redis]
COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def test_compose_starts_the_web_server_as_run_does():
    assert yaml.safe_load(COMPOSE.read_text())["services"]["web"]["command"] == WEB_COMMAND


@pytest.fixture
def web(redis, redis_url, tmp_path):
    port = free_port()
    env = {**os.environ, "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET, "REDIS_URL": redis_url, "PORT": str(port),
           "DATABASE_URL": f"sqlite:///{tmp_path / 'issue-sorter.db'}"}
    log = (tmp_path / "web.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "issue_sorter.cli", *WEB_COMMAND], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _healthy(f"http://127.0.0.1:{port}"), 60, "the web server to answer /healthz")
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_signed_delivery_is_answered_while_20_slow_clients_are_connected(web):
    stop = threading.Event()
    slow = [socket.create_connection(("127.0.0.1", web)) for _ in range(20)]

    def trickle() -> None:  # a header byte per client every 2 s, as a slowloris client sends them
        for sock in slow:
            sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        while not stop.wait(2):
            for sock in slow:
                try:
                    sock.sendall(b"a")
                except OSError:  # the server closed it: the request's deadline passed
                    pass

    threading.Thread(target=trickle, daemon=True).start()
    try:
        body = b'{"zen": "Design for failure.", "hook_id": 1}'
        answer = requests.post(f"http://127.0.0.1:{web}/webhook", data=body, timeout=8, headers={
            "X-GitHub-Event": "ping", "X-GitHub-Delivery": "slow-clients", "Content-Type": "application/json",
            "X-Hub-Signature-256": sign_body(body, WEBHOOK_SECRET)})
        assert answer.status_code == 200
    finally:
        stop.set()
        for sock in slow:
            sock.close()
