"""The job contract (core.queues): every job name resolves to a function that takes what callers send.

The processes enqueue by name and never import each other's jobs, so a renamed function or argument
would only break in production; these tests import each one instead.
"""

import dataclasses
import importlib
import inspect

import pytest

from bot.intake import events, webhooks
from core import queues
from tests.conftest import WEBHOOK_SECRET


def resolve(spec: queues.JobSpec):
    module, _, name = spec.name.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("spec", queues.JOBS, ids=lambda spec: spec.name)
def test_every_job_name_resolves_to_a_function_accepting_its_arguments(spec):
    function = resolve(spec)
    assert callable(function)
    signature = inspect.signature(function)
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    assert positional == [], "RQ jobs take keyword arguments only"
    signature.bind(**{argument: None for argument in spec.arguments})  # raises TypeError if not accepted
    required = {name for name, p in signature.parameters.items()
                if p.kind == p.KEYWORD_ONLY and p.default is p.empty}
    assert required <= spec.arguments, f"{spec.name} requires {required - spec.arguments}, not in the contract"


@pytest.mark.parametrize("spec", queues.JOBS, ids=lambda spec: spec.name)
def test_every_job_runs_on_a_queue_that_has_a_worker_and_a_timeout(spec):
    assert spec.queue in queues.QUEUES and spec.queue in queues.JOB_TIMEOUT
    application = spec.name.split(".")[0]
    assert (spec.queue == queues.TRAINING_QUEUE) == (application == "trainer"), \
        "the training worker serves the trainer's jobs, the bot's worker the bot's"


@pytest.mark.parametrize("route", list(webhooks.ROUTES.items()), ids=lambda route: f"{route[0][0].__name__}")
def test_each_routed_event_sends_every_argument_its_job_needs(route):
    (event_type, _action), spec = route
    sent = {field.name for field in dataclasses.fields(event_type)}
    assert spec.arguments <= sent, f"{event_type.__name__} lacks {spec.arguments - sent} for {spec.name}"


@pytest.mark.parametrize("route", list(webhooks.ROUTES.items()), ids=lambda route: f"{route[0][0].__name__}")
def test_the_issue_text_an_event_sends_travels_beside_its_job_not_in_it(route):
    """An issue's title and body are named in the contract as `text`, kept out of the job (core.queues)."""
    (event_type, _action), spec = route
    carries_issue = any(field.type in ("IssueSnapshot", events.IssueSnapshot)
                        for field in dataclasses.fields(event_type))
    assert set(spec.text) == ({"snapshot.title", "snapshot.body"} if carries_issue else set())


def test_enqueue_refuses_a_call_that_breaks_the_contract_before_it_reaches_a_worker():
    with pytest.raises(TypeError, match="scope"):
        queues.enqueue(None, queues.RETRAIN, {"trigger": "manual"})


def test_a_delivery_is_enqueued_under_its_contract_name(settings, payload, redis):
    """What the receiver puts on the queue is what a worker will import."""
    from bot.app import create_app
    from tests.bot.conftest import deliver

    client = create_app(settings, redis=redis).test_client()
    assert deliver(client, "issues", payload("issues/opened"), "contract-1", WEBHOOK_SECRET).status_code == 202
    (job,) = queues.make_queue(redis, queues.LABELING_QUEUE).jobs
    assert job.func_name == queues.LABEL_ISSUE.name and job.func is resolve(queues.LABEL_ISSUE)
    assert set(job.kwargs) == {field.name for field in dataclasses.fields(events.IssueEvent)}


@pytest.mark.redis
def test_the_training_worker_starts_without_a_serving_model_and_holds_none(settings, redis):
    """The bot's worker refuses to start with nothing promoted; the training worker has no model to load."""
    from trainer import context as training_context
    from trainer.worker import build_context, run_worker

    assert {field.name for field in dataclasses.fields(build_context(settings, redis=redis))} == {
        "settings", "sessionmaker", "redis"}
    try:
        run_worker(settings, burst=True)  # no model promoted, an empty queue: it starts, finds nothing, stops
    finally:
        training_context.configure(None)


@pytest.mark.redis
def test_a_job_in_redis_that_names_another_function_fails_without_running(settings, redis, tmp_path):
    """Whoever can write Redis picks a job's function by name; the workers run only the contract's."""
    from rq.job import JobStatus

    from trainer import context as training_context
    from trainer.worker import run_worker

    marker = tmp_path / "ran"
    queue = queues.make_queue(redis, queues.TRAINING_QUEUE)
    job = queue.enqueue("os.system", f"touch {marker}")
    with_callback = queue.enqueue(queues.RETRAIN_DUE.name, on_success="os.getcwd")
    try:
        run_worker(settings, burst=True)  # the training worker: it builds its RQ worker as production does
    finally:
        training_context.configure(None)
    assert not marker.exists()
    for refused in (job, with_callback):
        refused = queues.ContractJob.fetch(refused.id, connection=redis, serializer=queues.SERIALIZER)
        assert refused.get_status() == JobStatus.FAILED and "not one of core.queues.JOBS" in refused.exc_info
