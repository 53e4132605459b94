"""`issue-sorter worker` at start: the model is loaded and warmed up before the first job, and no torch op
runs before RQ has forked its scheduler (STACK-NOTES section 4)."""

import pytest
import torch
from rq import SimpleWorker

from bot import context
from bot.worker import run_worker
from core.encoder import TransformerClassifier
from core.queues import LABELING_QUEUE, ContractJob, make_queue
from tests.conftest import promote_model

pytestmark = [pytest.mark.redis, pytest.mark.slow]
EVENTS: list[str] = []


def first_job() -> None:
    EVENTS.append("first job")


@pytest.fixture
def recorded(monkeypatch):
    """What happens in the worker process, in order: model loads, the scheduler's start, predictions, jobs."""
    EVENTS.clear()
    load, predict, start_scheduler = (TransformerClassifier.from_directory.__func__, TransformerClassifier.predict,
                                      SimpleWorker._start_scheduler)

    def recording(name, function):
        def call(*args, **kwargs):
            EVENTS.append(name)
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(TransformerClassifier, "from_directory", classmethod(recording("load", load)))
    monkeypatch.setattr(TransformerClassifier, "predict", recording("predict", predict))
    monkeypatch.setattr(SimpleWorker, "_start_scheduler", recording("scheduler starts", start_scheduler))
    threads = torch.get_num_threads()
    yield EVENTS
    torch.set_num_threads(threads)
    context.configure(None)


def test_the_model_is_loaded_then_warmed_up_after_the_scheduler_forks_and_before_the_first_job(
        settings, sessions, redis, tiny_model_dir, recorded, monkeypatch):
    promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    monkeypatch.setattr(ContractJob, "NAMES", ContractJob.NAMES | {f"{__name__}.first_job"})  # a job of ours
    make_queue(redis, LABELING_QUEUE).enqueue(f"{__name__}.first_job")

    run_worker(settings, burst=True)

    assert recorded == ["load", "scheduler starts", "predict", "first job"]
    assert torch.get_num_threads() == settings.worker_threads == 1
    assert context.current().models.loads == 1
