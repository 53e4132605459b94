"""`issue-sorter forward`: deliveries from a webhook proxy channel reach the real receiver, signatures untouched."""

import json
import queue
import threading

import pytest
from flask import Flask, Response
from werkzeug.serving import make_server

from bot.app import create_app
from bot.intake.signatures import sign_body
from core.queues import LABELING_QUEUE, make_queue
from issue_sorter.forward import delivery_from_event, forward
from tests.conftest import WEBHOOK_SECRET
from tests.paths import WEBHOOKS

pytestmark = pytest.mark.redis


class Channel:
    """A smee.io-like channel: `publish` a delivery as GitHub would post it; clients stream it as SSE."""

    def __init__(self):
        self.events: queue.Queue = queue.Queue()
        app = Flask(__name__)
        app.add_url_rule("/channel", "stream", self.stream)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/channel"

    def publish(self, body: bytes, event: str, delivery: str, *, keep_raw: bool) -> None:
        data = {"host": "smee.io", "content-length": str(len(body)), "x-github-event": event,
                "x-github-delivery": delivery, "x-hub-signature-256": sign_body(body, WEBHOOK_SECRET),
                "content-type": "application/json", "user-agent": "GitHub-Hookshot/abc",
                "body": json.loads(body), "query": {}, "timestamp": 1}
        if keep_raw:
            data["rawbody"] = body.decode()
        self.events.put(data)

    def stream(self):
        def events():
            yield "event: ready\ndata: {}\n\n"
            while True:
                try:
                    yield f"data: {json.dumps(self.events.get(timeout=0.2))}\n\n"
                except queue.Empty:
                    yield ": ping\n\n"

        return Response(events(), mimetype="text/event-stream")


@pytest.fixture
def receiver(settings, redis):
    server = make_server("127.0.0.1", 0, create_app(settings, redis=redis), threaded=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/webhook"
    server.shutdown()


@pytest.mark.parametrize("keep_raw,compact", [(True, False), (False, True)])
def test_a_delivery_through_the_channel_is_accepted_by_the_receiver(receiver, redis, keep_raw, compact):
    """GitHub's own bytes when the channel keeps them; GitHub's compact JSON survives re-encoding."""
    original = (WEBHOOKS / "issues" / "opened.payload.json").read_bytes()
    body = json.dumps(json.loads(original), separators=(",", ":"), ensure_ascii=False).encode() if compact \
        else original
    channel, stop = Channel(), threading.Event()
    relay = threading.Thread(target=forward, args=(channel.url, receiver), kwargs={"stop": stop}, daemon=True)
    relay.start()
    channel.publish(body, "issues", "via-channel-1", keep_raw=keep_raw)
    labeling = make_queue(redis, LABELING_QUEUE)
    for _ in range(100):
        if labeling.count:
            break
        stop.wait(0.1)
    stop.set()
    (job,) = labeling.jobs  # accepted (202) and queued: the signature held
    assert job.kwargs["delivery_id"] == "via-channel-1"


def test_the_channels_own_fields_and_hop_headers_are_not_forwarded():
    body, headers = delivery_from_event({"host": "smee.io", "content-length": "9", "x-github-event": "ping",
                                         "body": {"zen": "x"}, "query": {}, "timestamp": 5})
    assert body == b'{"zen":"x"}' and headers == {"x-github-event": "ping", "content-type": "application/json"}
