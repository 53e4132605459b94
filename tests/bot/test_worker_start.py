"""`issue-sorter worker` at start: the model is loaded and warmed up before the first job, and no torch op
runs before RQ has forked its scheduler (STACK-NOTES section 4)."""

import dataclasses
import logging
import shutil
from pathlib import Path

import pytest
import torch
from rq import SimpleWorker

from bot import context
from bot.worker import run_worker
from core import engines
from core.card import update_card
from core.encoder import TransformerClassifier
from core.engines import ENGINES_KEY, TORCH_BF16, TORCH_FP32, WARMED_KEY, process_name
from core.queues import LABELING_QUEUE, ContractJob, make_queue
from tests.tiny_model import promote_model

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


def test_the_worker_records_its_engine_and_that_it_is_warmed_up_before_the_first_job(
        settings, sessions, redis, tiny_model_dir, recorded, monkeypatch, caplog):
    """What GET /metrics names, and what `issue-sorter run` can wait for before it says the service is up."""
    promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    seen_at_first_job = {}
    monkeypatch.setattr(ContractJob, "NAMES", ContractJob.NAMES | {f"{__name__}.first_job"})
    monkeypatch.setattr(f"{__name__}.first_job", lambda: seen_at_first_job.update(redis.hgetall(WARMED_KEY)))
    make_queue(redis, LABELING_QUEUE).enqueue(f"{__name__}.first_job")

    with caplog.at_level(logging.INFO, logger="core.engines"):
        run_worker(settings, burst=True)

    version = context.current().models.for_repository(None).version
    assert redis.hget(ENGINES_KEY, f"{process_name()}|global") == f"{version}|pytorch".encode()
    assert f"serving {version} with pytorch" in caplog.text  # no fast path was built for this tiny model
    assert set(seen_at_first_job) == {process_name().encode()}


def test_with_engine_measure_the_warm_up_times_every_allowed_engine_then_records_the_fastest(
        settings, sessions, redis, tiny_model_dir, tmp_path, recorded, caplog):
    """ISSUE_SORTER_ENGINE=measure: both engines are loaded before RQ forks its scheduler, timed only after
    it (the warm-up), and GET /metrics learns the engine the measurement chose."""
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "bf16-gated"))
    update_card(model, fast_path={"serves": "pytorch", "artefacts": {}, "gates": {TORCH_BF16: {
        "passed": True, "issues": 45, "top_label_agreement": 1.0, "macro_f1_fast": 0.5, "macro_f1_pytorch": 0.5}}})
    promote_model(settings.database_url, settings.model_dir, model)

    with caplog.at_level(logging.INFO, logger="core.engines"):
        run_worker(dataclasses.replace(settings, engine="measure"), burst=True)

    assert recorded[:3] == ["load", "load", "scheduler starts"]  # no inference before the fork
    version = context.current().models.for_repository(None).version
    served = redis.hget(ENGINES_KEY, f"{process_name()}|global").decode()
    assert served in (f"{version}|{TORCH_BF16}", f"{version}|{TORCH_FP32}")
    assert f"loaded {TORCH_BF16}, {TORCH_FP32} for {version}" in caplog.text
    assert f"serving {version} with {served.split('|')[1]} (measured on 4 fixed issues" in caplog.text
    assert set(redis.hkeys(WARMED_KEY)) == {process_name().encode()}


def test_a_warm_up_recorded_under_this_pid_by_an_earlier_process_is_forgotten_before_the_model_loads(
        settings, sessions, redis, tiny_model_dir, recorded, monkeypatch):
    """Redis outlives the App, and a restarted container reuses pids: the last run's record must not make
    `issue-sorter run` call this worker warmed up while it is still loading."""
    promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    engines.record_warmed(redis, 123456.0)  # the same host:pid, left by an earlier process
    seen_at_load = []
    load = TransformerClassifier.from_directory.__func__

    def loading(cls, *args, **kwargs):
        seen_at_load.append(redis.hget(WARMED_KEY, process_name()))
        return load(cls, *args, **kwargs)

    monkeypatch.setattr(TransformerClassifier, "from_directory", classmethod(loading))
    run_worker(settings, burst=True)

    assert seen_at_load == [None]
    assert redis.hget(WARMED_KEY, process_name()) not in (None, b"123456")  # this warm-up's own time
