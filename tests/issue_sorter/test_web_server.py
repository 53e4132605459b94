"""The web server never lends a thread to a slow client, and /review never takes the receiver's threads."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from issue_sorter.web_server import WebLimits, make_server
from tests.ports import free_port


def _app(release: threading.Event):
    """/review waits (a GitHub that does not answer) until released; every other path answers at once."""
    def app(environ, start_response):
        if environ["PATH_INFO"].startswith("/review"):
            release.wait(30)
        start_response("202 Accepted", [("Content-Type", "text/plain")])
        return [environ.get("HTTP_X_FORWARDED_PROTO", "ok").encode()]
    return app


@pytest.fixture
def serve():
    started = []
    release, stop = threading.Event(), threading.Event()

    def loop(server) -> None:  # server.run() in steps, so that the test can stop it and close it here
        while not stop.is_set():
            server.asyncore.loop(timeout=0.1, map=server._map, count=1)
        for channel in list(server._map.values()):
            channel.close()

    def start(limits: WebLimits) -> int:
        port = free_port()
        server = make_server(_app(release), limits, host="127.0.0.1", port=port)
        thread = threading.Thread(target=loop, args=(server,), daemon=True)
        thread.start()
        started.append((server, thread))
        return port

    yield start
    release.set()
    stop.set()
    for server, thread in started:
        thread.join(5)
        server.task_dispatcher.shutdown(timeout=1)
        server.review.shutdown(timeout=1)


def _slow_client(port: int) -> socket.socket:
    """A connection that has sent part of a request's headers, as a slowloris client keeps doing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return sock


def _post(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode())
        return sock.recv(100)


def test_a_delivery_is_answered_while_more_slow_clients_than_threads_are_connected(serve):
    port = serve(WebLimits(threads=2, review_threads=1))
    slow = [_slow_client(port) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"a")  # still trickling
        assert _post(port, "/webhook").startswith(b"HTTP/1.1 202")
    finally:
        for sock in slow:
            sock.close()


def test_review_requests_waiting_on_github_leave_the_receivers_threads_free(serve):
    port = serve(WebLimits(threads=2, review_threads=2))
    waiting = [threading.Thread(target=_post, args=(port, "/review/"), daemon=True) for _ in range(6)]
    for thread in waiting:
        thread.start()
    time.sleep(0.5)  # the review threads are all waiting now, four more requests queued behind them
    assert _post(port, "/webhook").startswith(b"HTTP/1.1 202")
    assert _post(port, "/healthz").startswith(b"HTTP/1.1 202")


def test_a_request_still_arriving_after_the_deadline_loses_its_connection(serve):
    port = serve(WebLimits(request_seconds=1))
    sock = _slow_client(port)
    sock.settimeout(1)
    closed = False
    try:
        for _ in range(20):  # a byte a second, each in time for an idle timeout, for longer than the deadline
            sock.sendall(b"a")
            try:
                closed = sock.recv(100) == b""
            except TimeoutError:
                continue
            break
    except ConnectionError:  # reset: the server closed it while a byte was on its way
        closed = True
    finally:
        sock.close()
    assert closed


def test_forwarded_headers_reach_the_app_which_decides_whom_to_believe(serve):
    """ISSUE_SORTER_TRUSTED_PROXIES is the app's (ProxyFix): waitress 3 would drop the headers before it."""
    port = serve(WebLimits())
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-Proto: https\r\nConnection: close\r\n\r\n")
        answer = b"".join(iter(lambda: sock.recv(1000), b""))  # to the close: the body may come apart
    assert answer.endswith(b"https")
