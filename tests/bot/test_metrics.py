"""GET /metrics and the workers in /healthz, read as Prometheus and an operator would, after real traffic
through the webhook, Redis, an RQ worker and the fake GitHub."""

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rq import SimpleWorker

from core import engines
from core.queues import SERIALIZER
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker

TOKEN = "the-operators-metrics-token"
# the web app as the operator runs it for Prometheus: with a metrics token, scraped with it
pytestmark = [pytest.mark.redis, pytest.mark.settings(metrics_token=TOKEN)]
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", headers=BEARER)
    assert response.status_code == 200 and response.mimetype == "text/plain"
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.get_data(as_text=True))
            for sample in family.samples}


@pytest.mark.slow
def test_deliveries_jobs_labels_and_github_errors_are_counted(worker_context, fake_github, client, payload, redis):
    fake_github.add_issue(REPO, 1, "App crashes with TypeError when saving", "Traceback ...")
    fake_github.add_issue(REPO, 2, "Add dark mode", "please")
    opened = issue_payload(payload, "opened", 1, title="App crashes with TypeError when saving")
    assert deliver(client, "issues", opened, "m-1").status_code == 202
    assert deliver(client, "issues", opened, "m-1").status_code == 202  # GitHub redelivered it
    assert deliver(client, "issues", opened, "m-2", secret="wrong").status_code == 401
    fake_github.fail_next("GET", rf"/repos/{REPO}/issues/2", 403)
    deliver(client, "issues", issue_payload(payload, "opened", 2, title="Add dark mode"), "m-3")
    run_worker(redis)
    metrics = scrape(client)
    deliveries = {labels: value for (name, labels), value in metrics.items() if name == "issue_sorter_deliveries_total"}
    assert deliveries[(("event", "issues"), ("outcome", "queued"))] == 2
    assert deliveries[(("event", "issues"), ("outcome", "duplicate"))] == 1
    assert deliveries[(("event", "unsigned"), ("outcome", "rejected"))] == 1  # its X-GitHub-Event is anyone's
    assert metrics[("issue_sorter_predictions_total", (("outcome", "applied"),))] == 1
    assert metrics[("issue_sorter_github_errors_total", (("status", "403"),))] == 1
    assert metrics[("issue_sorter_job_duration_seconds_count", (("job", "label_issue"),))] == 2
    assert metrics[("issue_sorter_queue_depth", (("queue", "labeling"),))] == 0


def test_healthz_says_which_queues_have_a_live_worker(client, redis):
    assert client.get("/healthz", headers=BEARER).json["workers"] == {"labeling": False, "feedback": False,
                                                                      "training": False}
    worker = SimpleWorker(["labeling", "feedback"], connection=redis, serializer=SERIALIZER)
    worker.register_birth()
    worker.heartbeat()
    try:
        assert client.get("/healthz", headers=BEARER).json["workers"] == {"labeling": True, "feedback": True,
                                                                          "training": False}
        assert scrape(client)[("issue_sorter_workers_alive", (("queue", "training"),))] == 0
    finally:
        worker.register_death()


def test_metrics_name_the_engine_each_live_bot_worker_serves_with(client, redis):
    """Chosen on each worker's machine (core.engines), so each worker says which; a dead one's is not shown."""
    worker = SimpleWorker(["labeling"], connection=redis, serializer=SERIALIZER)
    worker.register_birth()
    worker.heartbeat()
    engines.record_engine(redis, "global", "v7", engines.ORT_INT8)  # this process: the live worker's
    engines.record_engine(redis, "global", "v6", engines.TORCH_FP32, process="gone-host:1")
    try:
        metrics = scrape(client)
    finally:
        worker.register_death()
    serving = {labels: value for (name, labels), value in metrics.items() if name == "issue_sorter_serving_engine"}
    assert serving == {(("engine", "onnxruntime-int8"), ("scope", "global"), ("version", "v7"),
                        ("worker", engines.process_name())): 1.0}
