"""The operator's page: the instance's admins see queues, failed jobs (and retry them), workers, training
runs and the serving models; every other signed-in user, maintainers included, gets 404."""

import pytest
from rq import Queue
from rq.registry import FailedJobRegistry

from core.queues import FEEDBACK_QUEUE, SERIALIZER
from tests.bot.conftest import run_worker
from tests.bot.review.conftest import csrf_token, sign_in

pytestmark = pytest.mark.redis


def broken_job():
    raise RuntimeError("the database refused the row")


def test_a_maintainer_who_is_no_instance_admin_gets_404(client, review_github):
    sign_in(client, review_github, "maintainer")
    assert client.get("/review/operator").status_code == 404
    assert client.post("/review/operator/jobs/feedback/x/retry", data={"csrf_token": csrf_token(client)}
                       ).status_code == 404


def test_without_a_session_the_operator_page_redirects_to_sign_in(client):
    response = client.get("/review/operator")
    assert response.status_code == 302 and "/review/sign-in" in response.headers["Location"]


def test_an_admin_sees_a_failed_job_with_its_error_and_retries_it(client, review_github, redis, bare_context):
    job = Queue(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).enqueue(broken_job)
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert job.id in FailedJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids()
    sign_in(client, review_github, "boss")
    page = client.get("/review/operator").get_data(as_text=True)
    assert "RuntimeError: the database refused the row" in page and job.id in page
    assert "Queues" in page and "Models serving" in page and "Last training runs" in page
    answer = client.post(f"/review/operator/jobs/{FEEDBACK_QUEUE}/{job.id}/retry",
                         data={"csrf_token": csrf_token(client)})
    assert answer.status_code == 303
    assert job.id not in FailedJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids()
    assert job.id in Queue(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).job_ids  # back on its queue


def test_a_retry_needs_its_csrf_token(client, review_github, redis):
    sign_in(client, review_github, "boss")
    assert client.post(f"/review/operator/jobs/{FEEDBACK_QUEUE}/x/retry").status_code == 400
