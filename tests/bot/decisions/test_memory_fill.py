"""A repository's history reaches its memory on the feedback queue, never on the labelling path: signed
deliveries → Redis → RQ worker → the fake GitHub over HTTP, with a fake encoder serving (no torch)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from rq import Queue
from sqlalchemy import select

from bot.decisions import memory_fill
from bot.jobs import fill_memory
from bot.labeling.serving import Served, ServingModels
from core import memory, store
from core.db import session_scope
from core.queues import FEEDBACK_QUEUE, LABELING_QUEUE, SERIALIZER
from core.tables import IssueRecord, MemoryEntry, Prediction
from core.thresholds import OWN
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker
from tests.bot.lifecycle.test_backfill import add_issues, installation_delivery
from tests.core.test_memory import confirmed_issues, serve
from tests.fakes import FakeEncoder

pytestmark = pytest.mark.redis
BACKFILLED = {1: "bug", 2: "enhancement", 3: "question", 8: "area/ui", 9: "Type: Bug"}  # tests/bot/test_backfill


def serving_from(sessions):
    """The registry's answer, as bot.worker resolves it: which version serves a repository."""
    def resolve(repo: str | None, session=None) -> Served | None:
        if session is None:
            with session_scope(sessions) as own:
                return resolve(repo, own)
        row = store.serving_model_for(session, repo)
        return Served("global", row.version, row.path) if row else None
    return resolve


@pytest.fixture
def encoder(bare_context):
    """A fake encoder served as the promoted version "fake-1", through ServingModels as the worker builds it."""
    encoder = FakeEncoder({"crash": "bug"})
    with session_scope(bare_context.sessionmaker) as session:
        serve(session, encoder.version)
    bare_context.models = ServingModels(serving_from(bare_context.sessionmaker), lambda path: encoder,
                                        on_serve=functools.partial(memory_fill.queue_fill_on_first_serving, bare_context.redis))
    return encoder


def memory_rows(sessions) -> dict[int, tuple[str, str]]:
    with session_scope(sessions) as session:
        rows = session.execute(select(IssueRecord.number, MemoryEntry.label, MemoryEntry.model_version)
                               .join(IssueRecord, IssueRecord.id == MemoryEntry.issue_id)).all()
        return {number: (label, version) for number, label, version in rows}


def waiting(redis, queue: str) -> list[str]:
    return [job.func_name for job in Queue(queue, connection=redis, serializer=SERIALIZER).jobs]


def test_backfilled_issues_reach_the_memory_without_any_labelling_job(bare_context, encoder, fake_github, client,
                                                                        payload, redis, caplog):
    caplog.set_level("INFO")
    add_issues(fake_github)
    assert deliver(client, "installation", installation_delivery(payload, "installation"), "inst-1").status_code == 202
    run_worker(redis, queues=(FEEDBACK_QUEUE,))  # the labelling queue is never worked
    assert memory_rows(bare_context.sessionmaker) == {n: (label, "fake-1") for n, label in BACKFILLED.items()}
    # each once by the memory's fill, and once by the dry run on the history (bot.labeling.backtest)
    assert sorted(encoder.embedded) == sorted(2 * [f"Issue {n}\n\nBody of {n}" for n in BACKFILLED])
    with session_scope(bare_context.sessionmaker) as session:
        assert session.scalars(select(Prediction)).all() == []
        repository = store.find_repository(session, full_name=REPO)
        assert (repository.memory_version, repository.memory_embedded, repository.memory_of) == ("fake-1", 5, 5)
    assert f"memory of {REPO}: 5 of 5 issues embedded by fake-1" in caplog.text


def test_a_labelling_job_embeds_only_the_issue_it_labels(bare_context, encoder, fake_github, client, payload,
                                                          redis):
    with session_scope(bare_context.sessionmaker) as session:
        confirmed_issues(session, 40, repo=REPO)  # the history, stored and not embedded yet
    fake_github.add_issue(REPO, 41, "Crash on start", "It crashes")
    opened = issue_payload(payload, "opened", 41, title="Crash on start", body="It crashes")
    assert deliver(client, "issues", opened, "open-41").status_code == 202
    run_worker(redis, queues=(LABELING_QUEUE,))
    assert encoder.embedded == ["Crash on start\n\nIt crashes"]
    assert memory_rows(bare_context.sessionmaker) == {}
    assert waiting(redis, FEEDBACK_QUEUE) == ["bot.jobs.fill_memory"]  # the history goes there instead
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert len(memory_rows(bare_context.sessionmaker)) == 40 and len(encoder.embedded) == 41


def test_a_fill_is_queued_once_per_repository_and_version_while_it_waits(bare_context, encoder, fake_github,
                                                                          client, payload, redis):
    for number in (1, 2):
        fake_github.add_issue(REPO, number, "Crash", "")
        deliver(client, "issues", issue_payload(payload, "opened", number, title="Crash"), f"open-{number}")
    run_worker(redis, queues=(LABELING_QUEUE,))
    assert waiting(redis, FEEDBACK_QUEUE) == ["bot.jobs.fill_memory"]  # two jobs saw fake-1: one fill
    assert memory_fill.queue_fill(redis, REPO, "fake-1") is None  # another process, while it waits
    assert memory_fill.queue_fill(redis, REPO, "fake-2") is not None  # a new version has its own
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert memory_fill.queue_fill(redis, REPO, "fake-1") is not None  # once it ran, new history needs another


def test_the_fleet_queues_one_fill_per_repository_and_version_however_many_workers_serve_it(redis):
    """Three workers (and one of them restarted) serving the same repository with the same version: one
    fill, even once it has run; a new version has its own."""
    def worker(version: str) -> ServingModels:
        return ServingModels(lambda repo: Served("global", version, "unused"), lambda path: object(),
                             on_serve=functools.partial(memory_fill.queue_fill_on_first_serving, redis))

    for process in (worker("fake-1"), worker("fake-1"), worker("fake-1")):
        process.for_repository(REPO)
    assert waiting(redis, FEEDBACK_QUEUE) == ["bot.jobs.fill_memory"]
    memory_fill.mark_started(redis, REPO, "fake-1")  # it ran
    worker("fake-1").for_repository(REPO)  # a restarted worker
    assert waiting(redis, FEEDBACK_QUEUE) == ["bot.jobs.fill_memory"]
    worker("fake-2").for_repository(REPO)
    assert waiting(redis, FEEDBACK_QUEUE) == ["bot.jobs.fill_memory"] * 2


def test_a_promoted_version_refills_the_memory_and_then_the_old_rows_go(bare_context, encoder, fake_github, client,
                                                                        payload, redis):
    with session_scope(bare_context.sessionmaker) as session:
        confirmed_issues(session, 3, repo=REPO)
    fake_github.add_issue(REPO, 4, "Crash", "")
    deliver(client, "issues", issue_payload(payload, "opened", 4, title="Crash"), "open-4")
    run_worker(redis)
    newer = FakeEncoder({"crash": "bug"}, version="fake-2")
    with session_scope(bare_context.sessionmaker) as session:
        serve(session, newer.version)
    bare_context.models = ServingModels(serving_from(bare_context.sessionmaker), lambda path: newer,
                                        on_serve=functools.partial(memory_fill.queue_fill_on_first_serving, redis))
    fake_github.add_issue(REPO, 5, "Crash", "")
    deliver(client, "issues", issue_payload(payload, "opened", 5, title="Crash"), "open-5")
    run_worker(redis)
    assert set(memory_rows(bare_context.sessionmaker).values()) == {("bug", "fake-2")}
    assert len(memory_rows(bare_context.sessionmaker)) == 3


def test_with_the_memory_off_nothing_is_filled(bare_context, encoder):
    bare_context.settings = dataclasses.replace(bare_context.settings, memory=False)
    assert fill_memory(repo=REPO, version="fake-1") == "skipped: the memory is off"
    assert encoder.embedded == []


def stored_thresholds(sessions) -> dict | None:
    with session_scope(sessions) as session:
        cache = store.find_repository(session, full_name=REPO).threshold_cache
        return cache and cache["stats"]


def test_the_thresholds_follow_the_memory_on_the_feedback_queue_and_the_labelling_job_only_reads_them(
        bare_context, encoder, fake_github, client, payload, redis):
    with session_scope(bare_context.sessionmaker) as session:
        confirmed_issues(session, 40, repo=REPO)
    fake_github.add_issue(REPO, 41, "Crash on start", "It crashes")
    deliver(client, "issues", issue_payload(payload, "opened", 41, title="Crash on start"), "open-41")
    run_worker(redis, queues=(LABELING_QUEUE,))
    assert stored_thresholds(bare_context.sessionmaker)["from_history"] == 0  # the first serve stores them
    run_worker(redis, queues=(FEEDBACK_QUEUE,))  # the fill, then the refresh
    refreshed = stored_thresholds(bare_context.sessionmaker)
    assert refreshed["from_history"] == 40 and refreshed["kinds"]["bug"]["source"] == OWN
    with session_scope(bare_context.sessionmaker) as session:  # one more confirmed issue in the memory
        repository = store.find_repository(session, full_name=REPO)
        issue, _ = store.upsert_issue(session, repository, 50, title="Crash", body="", author_login="a", state="open")
        issue.confirmed_label = "bug"
        memory.remember(session, issue, "bug", encoder.version, [1.0] + [0.0] * 7, scores={"bug": 0.9,
                                                                                             "feature": 0.05,
                                                                                             "question": 0.05})
    fake_github.add_issue(REPO, 42, "Crash again", "")
    deliver(client, "issues", issue_payload(payload, "opened", 42, title="Crash again"), "open-42")
    run_worker(redis, queues=(LABELING_QUEUE,))
    assert stored_thresholds(bare_context.sessionmaker) == refreshed  # read as stored, not recomputed


def test_an_own_label_a_maintainer_puts_on_an_issue_without_kind_reaches_the_memory_at_once(
        bare_context, encoder, fake_github, client, payload, redis):
    """Before, the feedback job embedded a newly confirmed kind only; an issue given nothing but an own
    label waited for a fill, and kept its row once the label was taken off again."""
    from rq import SimpleWorker

    labeled = issue_payload(payload, "labeled", 7, title="Stream stops", body="It stops",
                            labels=["streaming"], label="streaming", sender="maintainer")
    assert deliver(client, "issues", labeled, "label-7").status_code == 202
    SimpleWorker([FEEDBACK_QUEUE], connection=redis, serializer=SERIALIZER).work(burst=True, max_jobs=1)
    assert memory_rows(bare_context.sessionmaker) == {7: (memory.NO_KIND, "fake-1")}  # the event's job did it
    assert encoder.embedded == ["Stream stops\n\nIt stops"]
    unlabeled = issue_payload(payload, "unlabeled", 7, title="Stream stops", body="It stops", labels=[],
                              label="streaming", sender="maintainer")
    assert deliver(client, "issues", unlabeled, "unlabel-7").status_code == 202
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert memory_rows(bare_context.sessionmaker) == {}
    assert encoder.embedded == ["Stream stops\n\nIt stops"]  # the fill that was queued found nothing to do


def test_an_installation_queues_at_most_its_quota_of_fills_and_the_rest_wait_their_turn(redis, caplog):
    """Fifty repositories of one installation promoted at once: two fills in the feedback queue, the others
    in the installation's line, each queued as one starts; another installation's fill is never held."""
    repos = [f"big/repo-{n}" for n in range(5)]
    queued = [memory_fill.queue_fill(redis, repo, "fake-1", limit=2) for repo in repos]
    assert [job is not None for job in queued] == [True, True, False, False, False]
    assert "big/repo-2: fill by fake-1 waits its turn" in caplog.text
    assert "ISSUE_SORTER_MAX_QUEUED_MEMORY_FILLS" in caplog.text
    assert memory_fill.queue_fill(redis, "quiet/app", "fake-1", limit=2) is not None  # another installation
    assert memory_fill.queue_fill(redis, repos[3], "fake-1", limit=2) is None  # waiting already: not twice
    queue, started = Queue(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER), []
    while big := [job for job in queue.jobs if job.kwargs["repo"].startswith("big/")]:
        assert len(big) <= 2  # never more than the quota in the queue
        queue.remove(big[0])  # the feedback worker takes it, and the fill starts
        memory_fill.mark_started(redis, big[0].kwargs["repo"], "fake-1", limit=2)
        started.append(big[0].kwargs["repo"])
    assert started == repos  # none lost, in the order they were asked for
