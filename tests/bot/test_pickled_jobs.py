"""An upgrade loses no queued job: a worker starting rewrites the pickled jobs an
older version queued as JSON jobs, instead of failing each one (the JSON serializer cannot read them), and
never runs what a pickle names.
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import zlib

import pytest
from rq import Queue
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from bot.intake.queueing import DELIVERY_KEY
from bot.worker import upgrade_queued_jobs
from core import queues
from core.pickled_jobs import is_pickle
from core.queues import FEEDBACK_QUEUE, LABELING_QUEUE, SERIALIZER, make_queue
from tests.bot.conftest import REPO, run_worker

pytestmark = pytest.mark.redis

OLD_SNAPSHOT = {"number": 4, "title": "Crash on save", "body": "Traceback ...", "state": "open", "labels": [],
                "is_pull_request": False, "author_login": "alice", "created_at": "2026-01-02T03:04:05+00:00",
                "issue_type": None, "updated_at": "2026-01-02T03:04:05+00:00"}


def old_version_enqueue(redis, queue: str, func: str, job_id: str, kwargs: dict, *, at=None):
    """What the version before JSON jobs did: RQ's default serializer (pickle), the issue text in the job."""
    old = Queue(queue, connection=redis)
    if at is None:
        return old.enqueue(func, kwargs=kwargs, job_id=job_id, meta={"attempt": 2})
    return old.enqueue_at(at, func, kwargs=kwargs, job_id=job_id)


def test_pickled_jobs_are_rewritten_as_json_with_their_text_beside_them(redis):
    kwargs = {"delivery_id": "d-old", "installation_id": 1, "repo": REPO, "number": 4, "action": "opened",
              "snapshot": OLD_SNAPSHOT}
    old_version_enqueue(redis, LABELING_QUEUE, queues.LABEL_ISSUE.name, "label_issue--d-old", kwargs)
    old_version_enqueue(redis, FEEDBACK_QUEUE, queues.REFRESH_LABELS.name, "refresh_labels--d-later",
                        {"delivery_id": "d-later", "installation_id": 1, "repo": REPO, "action": "deleted",
                         "label": "bug"}, at=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc))
    assert is_pickle(zlib.decompress(redis.hget("rq:job:label_issue--d-old", "data")))

    upgrade = upgrade_queued_jobs(redis, (LABELING_QUEUE, FEEDBACK_QUEUE))
    assert sorted(upgrade.converted) == ["label_issue--d-old", "refresh_labels--d-later"] and not upgrade.refused
    job = make_queue(redis, LABELING_QUEUE).fetch_job("label_issue--d-old")  # JSON now: it reads
    assert job.func_name == queues.LABEL_ISSUE.name and job.meta == {"attempt": 2}
    assert job.kwargs["snapshot"]["number"] == 4 and "title" not in job.kwargs["snapshot"]
    assert queues.job_text(redis, queues.LABEL_ISSUE, job.id, job.kwargs) == kwargs  # the text, beside it
    assert ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).get_job_ids() == [
        "refresh_labels--d-later"]
    assert upgrade_queued_jobs(redis, (LABELING_QUEUE, FEEDBACK_QUEUE)).converted == []  # once only


def test_an_upgraded_job_runs_on_the_new_worker(bare_context, redis):
    """On the old code the worker failed it: the JSON serializer cannot read a pickle."""
    old_version_enqueue(redis, LABELING_QUEUE, queues.REFRESH_LABELS.name, "refresh_labels--d-run",
                        {"delivery_id": "d-run", "installation_id": 1, "repo": REPO, "action": "created",
                         "label": "bug"})
    upgrade_queued_jobs(redis, (LABELING_QUEUE,))
    run_worker(redis, queues=(LABELING_QUEUE,))
    job = make_queue(redis, LABELING_QUEUE).fetch_job("refresh_labels--d-run")
    assert job.get_status() == "finished" and "will be listed again" in job.return_value()


class Sneaky:
    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_that_names_code_is_refused_unrun_and_its_delivery_can_come_again(redis, tmp_path):
    Sneaky.path = tmp_path / "ran"
    data = pickle.dumps((queues.REFRESH_LABELS.name, None, (), {"delivery_id": "d-evil", "x": Sneaky()}))
    job = old_version_enqueue(redis, LABELING_QUEUE, queues.REFRESH_LABELS.name, "refresh_labels--d-evil",
                              {"delivery_id": "d-evil"})
    redis.hset(job.key, "data", zlib.compress(data))
    redis.set(DELIVERY_KEY.format("d-evil"), LABELING_QUEUE)
    upgrade = upgrade_queued_jobs(redis, (LABELING_QUEUE,))
    assert list(upgrade.refused) == ["refresh_labels--d-evil"]
    assert ".system" in upgrade.refused["refresh_labels--d-evil"]  # named, never loaded
    assert not Sneaky.path.exists()
    assert make_queue(redis, LABELING_QUEUE).get_job_ids() == []
    failed = FailedJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert failed.get_job_ids() == ["refresh_labels--d-evil"]
    assert "Redeliver delivery d-evil" in make_queue(redis, LABELING_QUEUE).fetch_job(
        "refresh_labels--d-evil").exc_info
    assert not redis.exists(DELIVERY_KEY.format("d-evil"))  # GitHub's redelivery is queued anew


def test_an_old_job_missing_an_argument_is_refused_with_its_delivery_named(redis):
    old_version_enqueue(redis, LABELING_QUEUE, queues.LABEL_ISSUE.name, "label_issue--d-short",
                        {"delivery_id": "d-short", "repo": REPO})
    upgrade = upgrade_queued_jobs(redis, (LABELING_QUEUE,))
    assert "needs action, installation_id, number, snapshot" in upgrade.refused["label_issue--d-short"]
