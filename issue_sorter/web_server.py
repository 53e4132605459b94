"""`issue-sorter web`: the App's WSGI app under waitress, which never lends a thread to a slow client.

waitress reads each request, headers and body, in its one event loop and hands it to a thread only once it has
arrived whole; here a request must arrive within `request_seconds` of its first byte or its connection is
closed, and `/review` (whose views call GitHub) runs on threads of its own, so neither a client trickling bytes
nor a slow GitHub API holds a thread that a delivery needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

REVIEW_PREFIX = "/review"


@dataclass(frozen=True)
class WebLimits:
    """How the receiver shares its threads and how long it waits on a client."""

    threads: int = 8  # threads answering /webhook, /healthz and /metrics
    review_threads: int = 4  # threads of /review alone: its calls to GitHub never take the receiver's
    request_seconds: float = 10.0  # a request's headers and body arrive within this of its first byte (GitHub waits 10 s)
    idle_seconds: float = 15.0  # an open connection with no request in progress closes after this
    connection_limit: int = 500  # open connections at once; more wait in the listen backlog
    max_body_bytes: int = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB


class _Channel(HTTPChannel):
    """A connection that remembers when the request it is reading began."""

    request_began = 0.0

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.request_began = time.monotonic()
        return super().received(data)


class _Server(TcpWSGIServer):
    """waitress's TCP server with two thread pools and a deadline on each request's arrival."""

    channel_class = _Channel

    def __init__(self, app, *, limits: WebLimits, adj: Adjustments, review: ThreadedTaskDispatcher,
                 receiver: ThreadedTaskDispatcher):
        super().__init__(app, map={}, dispatcher=receiver, adj=adj)
        self.limits = limits
        self.review = review

    def add_task(self, channel: HTTPChannel) -> None:
        path = channel.requests[0].path or ""
        is_review = path == REVIEW_PREFIX or path.startswith(REVIEW_PREFIX + "/")
        (self.review if is_review else self.task_dispatcher).add_task(channel)

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        late = time.monotonic() - self.limits.request_seconds
        for channel in list(self.active_channels.values()):
            if channel.request is not None and channel.request_began < late:
                channel.will_close = True  # the loop closes it: a trickle of bytes never holds it open


def make_server(app, limits: WebLimits, *, host: str, port: int) -> _Server:
    """The server, listening; `run()` serves until the process is stopped."""
    adj = Adjustments(host=host, port=port, threads=limits.threads, channel_timeout=limits.idle_seconds,
                      cleanup_interval=1, connection_limit=limits.connection_limit,
                      max_request_body_size=limits.max_body_bytes, ident="issue-sorter",
                      # X-Forwarded-* reach the app: ISSUE_SORTER_TRUSTED_PROXIES decides there (bot.review.web)
                      clear_untrusted_proxy_headers=False)
    pools = {}
    for name, count in (("receiver", limits.threads), ("review", limits.review_threads)):
        pools[name] = ThreadedTaskDispatcher()
        pools[name].set_thread_count(count)
    return _Server(app, limits=limits, adj=adj, **pools)
