import json
import subprocess
import sys

import pytest
from rq import Queue

from bot.app import MAX_DELIVERY_BYTES, create_app
from bot.intake.queueing import DELIVERY_KEY
from bot.intake.signatures import sign_body
from core.queues import LABELING_QUEUE, SERIALIZER
from tests.conftest import WEBHOOK_SECRET, dead_redis

pytestmark = pytest.mark.redis


def deliver(client, event: str, body: bytes, delivery: str = "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            secret: str = WEBHOOK_SECRET, headers: dict | None = None):
    sent = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sign_body(body, secret),
            "Content-Type": "application/json"}
    sent.update(headers or {})
    return client.post("/webhook", data=body, headers={k: v for k, v in sent.items() if v is not None})


def opened_body(payload) -> bytes:
    body = payload("issues/opened")
    body["installation"] = {"id": 1}
    return json.dumps(body).encode()


def test_issue_opened_is_queued_once_with_a_delivery_derived_job_id(client, redis, payload):
    response = deliver(client, "issues", opened_body(payload), delivery="d-1")
    assert response.status_code == 202
    queue = Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert queue.job_ids == ["label_issue--d-1"]
    job = queue.fetch_job("label_issue--d-1")
    assert job.func_name == "bot.jobs.label_issue" and job.kwargs["number"] == 1


def test_a_redelivery_makes_no_second_job(client, redis, payload):
    body = opened_body(payload)
    assert deliver(client, "issues", body, delivery="d-2").status_code == 202
    second = deliver(client, "issues", body, delivery="d-2")
    assert second.status_code == 202 and second.json["queued"] is False
    assert Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).count == 1


@pytest.mark.parametrize("secret,header", [("wrong secret", None), (WEBHOOK_SECRET, "sha256=00"),
                                           (WEBHOOK_SECRET, "")])
def test_missing_or_wrong_signature_is_401_and_queues_nothing(client, redis, payload, secret, header):
    headers = {"X-Hub-Signature-256": header} if header is not None else {}
    response = deliver(client, "issues", opened_body(payload), secret=secret, headers=headers)
    assert response.status_code == 401
    assert Queue(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).count == 0 and not redis.keys(DELIVERY_KEY.format("*"))


def test_signature_is_checked_before_the_body_is_parsed(client):
    response = deliver(client, "issues", b"{not json", secret="wrong")
    assert response.status_code == 401


def test_malformed_json_and_missing_headers_are_400(client, payload):
    assert deliver(client, "issues", b"{not json").status_code == 400
    assert deliver(client, "issues", b"[1, 2]").status_code == 400
    broken = payload("issues/opened")
    del broken["issue"]
    assert deliver(client, "issues", json.dumps(broken).encode()).status_code == 400
    assert deliver(client, "issues", opened_body(payload), headers={"X-GitHub-Event": None}).status_code == 400
    assert deliver(client, "issues", opened_body(payload), headers={"X-GitHub-Delivery": None}).status_code == 400


def test_ping_is_200(client, payload):
    body = (json.dumps(payload("ping/with-app_id"))).encode()
    assert deliver(client, "ping", body).status_code == 200


@pytest.mark.parametrize("action", ["created", "edited", "deleted"])
def test_label_events_queue_a_refresh_of_the_repositorys_labels_on_the_labelling_queue(client, redis, payload,
                                                                                      action):
    response = deliver(client, "label", json.dumps(payload(f"label/{action}")).encode())
    assert response.status_code == 202
    (job,) = Queue("labeling", connection=redis, serializer=SERIALIZER).get_jobs()
    assert job.func_name == "bot.jobs.refresh_labels" and job.kwargs["repo"] == "Codertocat/Hello-World"


@pytest.mark.parametrize("event,name", [("pull_request", "pull_request/opened"),
                                        ("installation", "installation/new_permissions_accepted")])
def test_events_not_handled_are_204(client, redis, payload, event, name):
    response = deliver(client, event, json.dumps(payload(name)).encode())
    assert response.status_code == 204
    assert all(Queue(q, connection=redis).count == 0 for q in ("labeling", "feedback", "training"))


def test_deliveries_over_25_mb_are_413(client):
    response = deliver(client, "issues", b"x" * (MAX_DELIVERY_BYTES + 1))
    assert response.status_code == 413


def test_redis_unreachable_is_503_so_github_can_redeliver(settings, payload):
    client = create_app(settings, redis=dead_redis()).test_client()
    assert deliver(client, "issues", opened_body(payload)).status_code == 503


def test_healthz_reports_database_and_redis(client, settings):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json["database"] == "ok" and response.json["redis"] == "ok"
    dead = create_app(settings, redis=dead_redis()).test_client()
    assert dead.get("/healthz").status_code == 503


@pytest.mark.e2e  # a Python process of its own: what it imports
def test_the_request_path_never_imports_torch_or_the_jobs(settings, payload):
    """The receiver must answer fast: importing torch costs ~3 s, onnxruntime ~0.3 s, the model far more."""
    script = f"""
import json, sys
from redis import Redis
from bot.app import create_app
from core.settings import Settings
from bot.intake.signatures import sign_body
settings = Settings(webhook_secret="s", database_url={settings.database_url!r}, redis_url={settings.redis_url!r},
                    max_event_age=0)
client = create_app(settings, redis=Redis.from_url({settings.redis_url!r})).test_client()
body = {opened_body(payload)!r}
response = client.post("/webhook", data=body, headers={{"X-GitHub-Event": "issues", "X-GitHub-Delivery": "iso-1",
    "X-Hub-Signature-256": sign_body(body, "s")}})
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "github", "trainer",
                                                             "onnx", "onnxruntime")
               or m in ("bot.jobs", "bot.worker", "core.classifier", "core.encoder"))
print(json.dumps({{"status": response.status_code, "heavy": heavy}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"status": 202, "heavy": []}
