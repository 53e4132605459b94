"""Every webhook example of ../shared/github/webhooks (octokit's copies of GitHub's own), byte for byte and
signed, through the receiver and a real worker: each is answered 2xx (202 when it made a job, 204 when the
bot has nothing to do with it), and no job fails. A few events GitHub sends every App, that the examples
lack, go the same way."""

from __future__ import annotations

import json

import pytest
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry

from bot.intake.signatures import sign_body
from core.queues import QUEUES, SERIALIZER
from tests.bot.conftest import REPO, run_worker
from tests.conftest import WEBHOOK_SECRET
from tests.paths import WEBHOOKS

pytestmark = pytest.mark.redis
EXAMPLES = sorted(path.relative_to(WEBHOOKS).as_posix() for path in WEBHOOKS.rglob("*.json"))
# What the App is sent without asking (GitHub's docs: "Webhook events and payloads"), in their shapes
APP_EVENTS = {
    "installation_target": {"action": "renamed", "account": {"login": "Octocoders", "id": 38302899},
                            "changes": {"login": {"from": "Octocoders-old"}}, "target_type": "Organization",
                            "installation": {"id": 1}, "sender": {"login": "Codertocat", "type": "User"}},
    "github_app_authorization": {"action": "revoked", "sender": {"login": "Codertocat", "type": "User"}},
    "meta": {"action": "deleted", "hook_id": 1, "hook": {"type": "App", "id": 1, "active": True,
                                                         "events": ["issues"], "config": {}}},
}
# Answers the bot promises whatever else it learns to handle
KNOWN = {"ping/payload.json": 200, "issues/opened.payload.json": 202, "issues/labeled.payload.json": 202,
         "issue_comment/created.payload.json": 202, "installation/created.payload.json": 202,
         "pull_request/opened.payload.json": 204, "label/created.payload.json": 202}  # refreshes the labels


def _post(client, event: str, raw: bytes, delivery: str):
    return client.post("/webhook", data=raw, headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sign_body(raw, WEBHOOK_SECRET),
        "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/044aadd"})


def test_the_examples_are_all_here():
    assert len(EXAMPLES) == 43 and set(KNOWN) <= set(EXAMPLES)


def test_every_real_payload_is_answered_and_its_job_finishes(worker_context, fake_github, client, redis):
    fake_github.add_issue(REPO, 1, "Spelling error in the README file", "It looks like you accidently spelled")
    answers, jobs = {}, 0
    deliveries = [(name.split("/")[0], (WEBHOOKS / name).read_bytes(), name) for name in EXAMPLES]
    deliveries += [(event, json.dumps(body).encode(), event) for event, body in APP_EVENTS.items()]
    for n, (event, raw, name) in enumerate(deliveries):
        response = _post(client, event, raw, f"real-{n}")
        answers[name] = response.status_code
        before, jobs = jobs, sum(redis.llen(f"rq:queue:{queue}") for queue in QUEUES)
        assert (response.status_code == 202) == (jobs == before + 1), (name, response.status_code, response.data)
        assert response.status_code != 204 or response.data == b"", name
    assert {name: answers[name] for name in KNOWN} == KNOWN
    assert all(code in (200, 202, 204) for code in answers.values()), answers
    assert all(answers[event] == 204 for event in APP_EVENTS)

    ids = [job_id for queue in QUEUES for job_id in redis.lrange(f"rq:queue:{queue}", 0, -1)]
    run_worker(redis)
    jobs = Job.fetch_many([i.decode() for i in ids], connection=redis, serializer=SERIALIZER)
    assert {job.id: job.get_status() for job in jobs} == {job.id: JobStatus.FINISHED for job in jobs}
    assert all(FailedJobRegistry(queue, connection=redis, serializer=SERIALIZER).get_job_ids() == [] for queue in QUEUES)
    outcomes = {job.id: job.return_value() for job in jobs}
    assert not [o for o in outcomes.values() if str(o).startswith("failed")], outcomes
    assert "backfill queued for 1 repositories" in outcomes.values()  # installation.created did its work
