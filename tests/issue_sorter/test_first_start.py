"""`issue-sorter run` where its first model's registration left some engines' gates pending (trainer.fast_path):
a start queues them again for the training worker, so that a stop before it ran them loses nothing."""

from rq.job import JobStatus

from core.card import update_card
from core.engines import ORT_FP32, ORT_INT8
from core.migrate import upgrade
from core.queues import GATE_PENDING, TRAINING_QUEUE, make_queue
from core.settings import Settings
from issue_sorter.run import _prepare
from tests.conftest import REDIS_TEST_URL
from tests.ports import free_port
from tests.tiny_model import promote_model
from trainer.fast_path import PENDING


def test_a_start_queues_again_the_gates_the_first_model_left_pending_once_whatever_the_starts(
        tmp_path, tiny_model_dir, redis, capsys):
    settings = Settings(webhook_secret="s", database_url=f"sqlite:///{tmp_path / 'issue-sorter.db'}",
                        redis_url=REDIS_TEST_URL, model_dir=tmp_path / "models")
    upgrade(settings.database_url)
    version = promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    pending = {"passed": False, "pending": True, "reason": PENDING}
    update_card(settings.model_dir / version, fast_path={"gates": {ORT_INT8: pending, ORT_FP32: pending}})
    queue = make_queue(redis, TRAINING_QUEUE)

    _prepare(settings, {}, bootstrap=False)
    (queued,) = queue.get_jobs()
    assert (queued.func_name, queued.kwargs) == (GATE_PENDING.name, {"version": version})
    assert f"the training worker gates {ORT_INT8}, {ORT_FP32}" in capsys.readouterr().out
    _prepare(settings, {}, bootstrap=False)  # started again before the training worker ran it
    assert [job.id for job in queue.get_jobs()] == [queued.id]
    queue.remove(queued)  # a worker killed mid-run: RQ holds the job back for its retry (CRASH_RETRY)
    queued.set_status(JobStatus.SCHEDULED)
    _prepare(settings, {}, bootstrap=False)  # started again during that wait: the retry will run it
    assert queue.get_jobs() == []

    redis.flushdb()
    update_card(settings.model_dir / version, fast_path={"gates": {ORT_INT8: {"passed": False, "issues": 3},
                                                                   ORT_FP32: {"passed": True, "issues": 3}}})
    _prepare(settings, {}, bootstrap=False)  # its gates have run: nothing to queue
    assert queue.get_jobs() == []


def test_a_start_that_cannot_reach_redis_says_the_gates_wait_and_goes_on(tmp_path, tiny_model_dir, capsys):
    settings = Settings(webhook_secret="s", database_url=f"sqlite:///{tmp_path / 'issue-sorter.db'}",
                        redis_url=f"redis://127.0.0.1:{free_port()}/0", model_dir=tmp_path / "models")
    upgrade(settings.database_url)
    version = promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    update_card(settings.model_dir / version, fast_path={"gates": {ORT_INT8: {"passed": False, "pending": True,
                                                                              "reason": PENDING}}})
    _prepare(settings, {}, bootstrap=False)  # no traceback: the workers will say the same of Redis
    assert f"{version}'s pending engine gates not queued (ConnectionError)" in capsys.readouterr().err
