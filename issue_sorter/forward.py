"""`issue-sorter forward CHANNEL_URL` (and `run --forward`): GitHub reaching a laptop through a webhook
proxy channel such as smee.io.

GitHub posts to the public channel; this reads the channel's event stream (server-sent events, with
the maintained `sseclient-py`) and posts each delivery to the local receiver with GitHub's headers, so
the receiver checks the signature as if GitHub had called it. The body is the channel's raw copy
when it keeps one (`rawbody`); otherwise it is re-encoded compactly, which matches what GitHub sends
in practice, and a refused signature says so in the log.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import requests

log = logging.getLogger(__name__)
CHANNEL_FIELDS = {"body", "rawbody", "rawBody", "query", "timestamp"}  # what the channel adds beside headers
DROPPED_HEADERS = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding",
                   "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port"}
RECONNECT_SECONDS = (1, 2, 5, 10, 30)  # back-off after the channel drops the stream


def delivery_from_event(data: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of the delivery a channel event carries."""
    raw = data.get("rawbody") or data.get("rawBody")
    body = raw.encode() if isinstance(raw, str) else json.dumps(data.get("body"), separators=(",", ":"),
                                                                ensure_ascii=False).encode()
    headers = {key: str(value) for key, value in data.items()
               if key not in CHANNEL_FIELDS and key.lower() not in DROPPED_HEADERS and not isinstance(value, dict)}
    headers.setdefault("content-type", "application/json")
    return body, headers


def relay(data: Mapping[str, Any], target: str, post: Callable[..., requests.Response] = requests.post) -> int:
    """Post one channel event to the local receiver; returns its status."""
    body, headers = delivery_from_event(data)
    response = post(target, data=body, headers=headers, timeout=30)
    delivery = headers.get("x-github-delivery", "?")
    if response.status_code == 401:
        log.warning("the receiver refused delivery %s's signature: the channel may have re-encoded the body; "
                    "run behind a public HTTPS reverse proxy instead", delivery)
    else:
        log.info("forwarded delivery %s (%s): %s", delivery, headers.get("x-github-event"), response.status_code)
    return response.status_code


def forward(channel_url: str, target: str, *, stop: threading.Event | None = None,
            session: requests.Session | None = None) -> None:
    """Relay the channel's deliveries to `target` until `stop` is set, reconnecting when it drops."""
    from sseclient import SSEClient

    stop, session = stop or threading.Event(), session or requests.Session()
    failures = 0
    while not stop.is_set():
        try:
            with session.get(channel_url, stream=True, timeout=(10, 90),
                             headers={"Accept": "text/event-stream"}) as response:
                response.raise_for_status()
                log.info("forwarding %s to %s", channel_url, target)
                failures = 0
                for event in SSEClient(response).events():
                    if stop.is_set():
                        return
                    if event.event == "message" and event.data.startswith("{"):
                        relay(json.loads(event.data), target, session.post)
            stop.wait(RECONNECT_SECONDS[0])  # the channel closed the stream: open it again, politely
        except (requests.RequestException, ValueError) as error:
            wait = RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)]
            failures += 1
            log.warning("channel %s: %s; reconnecting in %d s", channel_url, type(error).__name__, wait)
            stop.wait(wait)
