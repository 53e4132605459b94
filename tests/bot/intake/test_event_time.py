"""One rule dates an event: the webhook's replay age limit, on the delivery's JSON,
and the order of an issue's events in its stored row, on the job's snapshot, read the same time.

They were two functions: the age limit took the newest `updated_at` of the issue or comment (None without
one), the ordering the issue's `updated_at`, else the delivery's arrival; and a stamp with an offset was
stored as it came, which SQLite read back as UTC, hours off.
"""

from __future__ import annotations

import datetime as dt

import pytest

from bot.github_api.issues import IssueSnapshot, event_time
from bot.intake import events
from core import store
from core.tables import IssueRecord
from tests.bot.rules import record

ARRIVED = "2026-03-04T05:06:07+00:00"


def _issue_payload(payload, updated_at):
    body = payload("issues/labeled")
    body["installation"] = {"id": 1}
    if updated_at is None:
        body["issue"].pop("updated_at", None)
    else:
        body["issue"]["updated_at"] = updated_at
    return body


@pytest.mark.parametrize("updated_at,expected", [
    ("2026-01-02T03:04:05Z", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)),
    ("2026-01-02T03:04:05", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)),  # naive: UTC
    ("2026-01-02T05:04:05+02:00", dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)),
    (None, dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)),  # undated: its arrival
])
def test_the_age_limit_and_the_stored_order_date_an_issue_event_alike(payload, sessions, updated_at, expected):
    body = _issue_payload(payload, updated_at)
    event = events.parse("issues", "d-1", body, received_at=ARRIVED)
    # what bot.intake.webhooks reads for the age limit, and what the worker stores as the issue's newest event
    assert event_time(None, ARRIVED, body.get("issue"), body.get("comment")) == expected
    record(sessions, event.job_kwargs(), bot_login=None, app_id=None)
    with sessions() as session:
        row = session.query(IssueRecord).one()
        assert store.as_utc(row.last_event_at) == expected


def test_the_newest_stamp_dates_an_event_and_a_broken_one_is_ignored():
    snapshot = IssueSnapshot(1, "t", "", "open", (), False, None, None,
                             updated_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    comment = {"updated_at": "2026-01-02T00:00:00Z"}
    assert event_time(snapshot, ARRIVED, comment) == dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    assert event_time(snapshot, ARRIVED, {"updated_at": "not a time"}, None, "x") == snapshot.updated_at
    assert event_time(None, None, {"updated_at": None}) is None


def test_the_webhook_has_no_rule_of_its_own():
    """The age limit's old function is gone: a second rule could drift from the ordering's again."""
    assert not hasattr(events, "payload_updated_at")
