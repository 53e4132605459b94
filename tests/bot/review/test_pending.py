"""Two quick clicks on one prediction: each own label is reviewed on its own, so accepting one and
rejecting another are both queued and both carried out, in the order clicked, none lost and none twice;
before, the second click was refused as "queued already" and lost."""

from __future__ import annotations

import time

import pytest
from rq import Queue, SimpleWorker
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler
from sqlalchemy import select

from bot.review import pending
from core.db import session_scope
from core.queues import FEEDBACK_QUEUE, SERIALIZER
from core.tables import LabelEvent, OwnLabelExample, Prediction
from tests.bot.conftest import REPO, run_worker
from tests.bot.review.conftest import csrf_token, seed_own_labels, sign_in

pytestmark = pytest.mark.redis
PAGE = f"/review/{REPO}"


def click(client, prediction_id: int, choice: str, label: str | None = None):
    data = {"choice": choice, "csrf_token": csrf_token(client), "filter": "all"}
    if label:
        data["label"] = label
    return client.post(f"{PAGE}/predictions/{prediction_id}", data=data,
                       headers={"Accept": "application/json"})


def own_decisions(sessions, prediction_id: int) -> dict[str, str | None]:
    with session_scope(sessions) as session:
        return {row.label: row.decision for row in session.get(Prediction, prediction_id).own_labels}


def label_events(sessions) -> list[tuple[str, str, str]]:
    with session_scope(sessions) as session:
        events = session.scalars(select(LabelEvent).order_by(LabelEvent.id))
        return [(e.action, e.label, e.actor_login) for e in events]


def test_accepting_one_own_label_and_rejecting_another_are_both_carried_out_in_order(
        client, review_github, sessions, bare_context, redis):
    row = seed_own_labels(sessions, review_github)
    sign_in(client, review_github, "helper")
    first = click(client, row.prediction_id, "own-accept", "streaming").get_json()["results"][0]
    second = click(client, row.prediction_id, "own-reject", "vision").get_json()["results"][0]
    assert (first["queued"], first["subject"]) == (True, "own:streaming")
    assert (second["queued"], second["subject"]) == (True, "own:vision")
    again = click(client, row.prediction_id, "own-accept", "streaming").get_json()["results"][0]
    assert not again["queued"] and again["message"] == "A review of 'streaming' on #5 is queued already."
    assert redis.llen("rq:queue:feedback") == 2  # one job per click, the repeated one none
    page = client.get(f"{PAGE}?filter=all").get_data(as_text=True)
    assert page.count('<span class="tag queued">queued</span>') == 2
    assert "accept by helper" in page and "reject by helper" in page
    assert review_github.issue_labels(REPO, 5) == ["vision"]  # the web process wrote nothing

    run_worker(redis)
    assert review_github.issue_labels(REPO, 5) == ["streaming"]
    assert own_decisions(sessions, row.prediction_id) == {"streaming": "accepted", "vision": "rejected"}
    assert label_events(sessions) == [("labeled", "streaming", "helper"), ("unlabeled", "vision", "helper")]
    with session_scope(sessions) as session:
        assert session.scalars(select(OwnLabelExample.label)).all() == ["streaming"]
    assert pending.states(redis, [row.prediction_id])[row.prediction_id].queued == {}
    page = client.get(f"{PAGE}?filter=all").get_data(as_text=True)
    assert "queued</span>" not in page and page.count('class="tag accepted"') == 1
    assert page.count('class="tag rejected"') == 1


def test_a_review_whose_earlier_click_is_still_queued_waits_its_turn(client, review_github, sessions,
                                                                     bare_context, redis):
    """The first click's job waits (the write spacing, a GitHub retry); the second's must not overtake it."""
    row = seed_own_labels(sessions, review_github)
    sign_in(client, review_github, "helper")
    click(client, row.prediction_id, "own-accept", "streaming")
    click(client, row.prediction_id, "own-reject", "vision")
    queue = Queue(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER)
    earlier, later = queue.job_ids
    redis.lrem(queue.key, 0, later)
    redis.lpush(queue.key, later)  # the later click's job reaches a worker first
    SimpleWorker([queue], connection=redis, serializer=SERIALIZER).work(burst=True, max_jobs=1)
    assert queue.fetch_job(later).return_value().startswith(
        "deferred 1.0 s: waiting for an earlier review of the same prediction")
    assert review_github.issue_labels(REPO, 5) == ["vision"] and label_events(sessions) == []
    scheduled = ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.count == 1

    run_worker(redis, queues=(FEEDBACK_QUEUE,))  # the earlier one
    assert label_events(sessions) == [("labeled", "streaming", "helper")]
    (waiting,) = scheduled.get_job_ids()
    redis.zadd(scheduled.key, {waiting: time.time() - 1})  # its wait is over
    scheduler = RQScheduler([FEEDBACK_QUEUE], connection=redis, serializer=SERIALIZER)
    scheduler.acquire_locks()
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    assert label_events(sessions) == [("labeled", "streaming", "helper"), ("unlabeled", "vision", "helper")]
    assert review_github.issue_labels(REPO, 5) == ["streaming"]


def test_the_kind_and_an_own_label_are_reviewed_side_by_side(client, review_github, sessions, bare_context,
                                                              redis):
    row = seed_own_labels(sessions, review_github, applied=(), suggested=("streaming",))
    sign_in(client, review_github, "maintainer")
    assert click(client, row.prediction_id, "accept").get_json()["results"][0]["queued"]
    assert click(client, row.prediction_id, "own-accept", "streaming").get_json()["results"][0]["queued"]
    assert not click(client, row.prediction_id, "reject").get_json()["results"][0]["queued"]  # the kind's is
    run_worker(redis)
    assert sorted(review_github.issue_labels(REPO, 5)) == ["bug", "streaming"]
    with session_scope(sessions) as session:
        assert session.get(Prediction, row.prediction_id).decision == "accepted"
    assert own_decisions(sessions, row.prediction_id) == {"streaming": "accepted"}


def test_a_mark_whose_job_died_stops_blocking_after_its_ttl(redis):
    clicked = time.time() - pending.QUEUED_TTL - 1
    assert pending.mark_queued(redis, 7, {"review_id": "dead", "by": "a"}, subject="own:x", now=clicked)
    assert pending.mark_queued(redis, 7, {"review_id": "next", "by": "b"}, subject="own:y")
    assert pending.is_turn(redis, 7, "next")  # the dead one is no earlier review any more
    assert pending.mark_queued(redis, 7, {"review_id": "again", "by": "c"}, subject="own:x")  # taken over
    assert not pending.is_turn(redis, 7, "again")  # clicked after "next"
    pending.finish(redis, 7, "done late", subject="own:x", review_id="dead")  # the dead job, finishing late
    assert set(pending.states(redis, [7])[7].queued) == {"own:x", "own:y"}  # keeps the newer click's mark
    pending.finish(redis, 7, "done", subject="own:y", review_id="next")
    assert pending.is_turn(redis, 7, "again")
    state = pending.states(redis, [7])[7]
    assert state.own_result("y") == "done" and state.own_result("x") is None  # x: queued again


def test_a_second_click_on_the_kind_while_it_is_queued_is_refused(redis):
    assert pending.mark_queued(redis, 8, {"review_id": "1"}, subject=pending.subject_of("accept", None))
    assert not pending.mark_queued(redis, 8, {"review_id": "2"}, subject=pending.subject_of("relabel", "bug"))
    assert pending.mark_queued(redis, 8, {"review_id": "3"}, subject=pending.subject_of("own-reject", "bug"))
