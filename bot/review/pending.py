"""Reviews between the click and the worker: "queued" while the job waits, then what it concluded.

A prediction is reviewed by subjects: its kind (accept, relabel or reject: one review at a time) and each
own label beside it (one at a time each), so a reviewer may accept one own label and reject another at
once. The web process marks a subject queued, numbered in the order of the clicks; the feedback worker
carries a review out only when no earlier review of the same prediction is still queued (`is_turn`; else
the job waits and comes back), so two quick clicks are both carried out, in order, and one click once.
The job then replaces its mark with its outcome, which the page shows until the decision is in the database.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from redis import Redis

from bot.review.decisions import OWN_CHOICES

QUEUED_TTL = 3600  # seconds; a mark whose job died without finishing stops blocking new clicks
RESULT_TTL = 86400  # seconds the job's outcome stays on the page
TURN_WAIT = 1.0  # seconds a review waits for an earlier one of its prediction, doubling to MAX_TURN_WAIT
MAX_TURN_WAIT = 30.0
KIND = "kind"  # the subject of accept, relabel and reject; an own label's is OWN_PREFIX + its name
OWN_PREFIX = "own:"
_PREFIX = "issue-sorter:review"
_QUEUED = _PREFIX + ":queued-reviews:{}"  # hash: subject → the queued review (JSON, its number and time too)
_NUMBER = _PREFIX + ":review-number:{}"  # the prediction's clicks counted: the order they are carried out in
_RESULTS = _PREFIX + ":review-results:{}"  # hash: subject → what its last job concluded
# a subject still held by a live mark refuses a second one; an expired one is taken over (its job died)
_MARK_LUA = """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and tonumber(ARGV[3]) - cjson.decode(held)['at'] < tonumber(ARGV[4]) then return 0 end
local review = cjson.decode(ARGV[2])
review['number'] = redis.call('INCR', KEYS[2])
review['at'] = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(review))
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return review['number']
"""


class NotItsTurn(Exception):
    """An earlier review of the same prediction is still queued: this one runs again later (bot.intake.queueing's
    deferral: no attempt counted, nothing asked of GitHub)."""

    deferral = True
    waits_for = "an earlier review of the same prediction"

    def __init__(self, deferrals: int):
        """It looks again in TURN_WAIT seconds, doubled for each of its `deferrals` so far, at most MAX_TURN_WAIT."""
        self.retry_after = min(TURN_WAIT * 2 ** min(deferrals, 10), MAX_TURN_WAIT)
        super().__init__(f"waits {self.retry_after:.0f} s for an earlier review of the same prediction")


def subject_of(choice: str | None, label: str | None) -> str:
    """What a review decides: the prediction's kind, or one own label."""
    return f"{OWN_PREFIX}{label}" if choice in OWN_CHOICES else KIND


def mark_queued(redis: Redis, prediction_id: int, review: dict, *, subject: str = KIND,
                now: float | None = None) -> bool:
    """Mark the subject queued (`review`: what the page shows, with the job's review_id); False when a
    review of that subject is queued already."""
    number = redis.eval(_MARK_LUA, 2, _QUEUED.format(prediction_id), _NUMBER.format(prediction_id), subject,
                        json.dumps(review), time.time() if now is None else now, QUEUED_TTL)
    return bool(number)


def unmark(redis: Redis, prediction_id: int, subject: str = KIND) -> None:
    """The job could not be queued: the click left nothing behind."""
    redis.hdel(_QUEUED.format(prediction_id), subject)


def is_turn(redis: Redis, prediction_id: int, review_id: str, *, now: float | None = None) -> bool:
    """Whether the review may be carried out now: no live mark of the prediction was clicked before its own
    (a review whose mark is gone, expired or never made, waits for nothing)."""
    live = _live(redis.hgetall(_QUEUED.format(prediction_id)), time.time() if now is None else now)
    mine = next((review for review in live.values() if review.get("review_id") == review_id), None)
    return mine is None or not any(review["number"] < mine["number"] for review in live.values())


def finish(redis: Redis, prediction_id: int, outcome: str, *, subject: str = KIND,
           review_id: str | None = None) -> None:
    """The job is done with its subject: keep its outcome, drop its mark (not a later click's, when
    `review_id` is given and the mark is another review's)."""
    key = _QUEUED.format(prediction_id)
    held = redis.hget(key, subject)
    pipeline = redis.pipeline()
    pipeline.hset(_RESULTS.format(prediction_id), subject, outcome)
    pipeline.expire(_RESULTS.format(prediction_id), RESULT_TTL)
    if held is not None and (review_id is None or json.loads(held).get("review_id") == review_id):
        pipeline.hdel(key, subject)
    pipeline.execute()


@dataclass(frozen=True)
class ReviewState:
    """A prediction's reviews between click and decision, by subject."""

    queued: dict[str, dict] = field(default_factory=dict)  # subject → the review queued (choice, label, by)
    results: dict[str, str] = field(default_factory=dict)  # subject → its last job's outcome

    @property
    def kind_queued(self) -> dict | None:
        return self.queued.get(KIND)

    @property
    def kind_result(self) -> str | None:
        return None if KIND in self.queued else self.results.get(KIND)

    def own_queued(self, label: str) -> dict | None:
        return self.queued.get(OWN_PREFIX + label)

    def own_result(self, label: str) -> str | None:
        subject = OWN_PREFIX + label
        return None if subject in self.queued else self.results.get(subject)


def states(redis: Redis, prediction_ids: Iterable[int], *, now: float | None = None
           ) -> dict[int, ReviewState]:
    """{prediction id: its ReviewState} for those with a review queued or a result kept."""
    ids = list(prediction_ids)
    if not ids:
        return {}
    pipeline = redis.pipeline()
    for prediction_id in ids:
        pipeline.hgetall(_QUEUED.format(prediction_id))
        pipeline.hgetall(_RESULTS.format(prediction_id))
    answers = pipeline.execute()
    now = time.time() if now is None else now
    found: dict[int, ReviewState] = {}
    for prediction_id, queued, results in zip(ids, answers[::2], answers[1::2]):
        state = ReviewState(_live(queued, now), {key.decode(): text.decode() for key, text in results.items()})
        if state.queued or state.results:
            found[prediction_id] = state
    return found


def _live(marks: dict[bytes, bytes], now: float) -> dict[str, dict]:
    """The marks of jobs that may still run, by subject."""
    reviews = {subject.decode(): json.loads(mark) for subject, mark in marks.items()}
    return {subject: review for subject, review in reviews.items() if now - review["at"] < QUEUED_TTL}
