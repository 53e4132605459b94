"""`IssueSnapshot`: an issue as GitHub's JSON describes it, in a webhook payload or a REST answer.

Both carry the same issue object, so one type serves the delivery's copy (dry-run, feedback) and the
fresh copy the worker reads from GitHub. Pure: no I/O here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class IssueSnapshot:
    number: int
    title: str
    body: str  # "" when the issue has no body
    state: str  # "open" | "closed"
    labels: tuple[str, ...]
    is_pull_request: bool  # the issues API lists pull requests too
    author_login: str | None
    created_at: dt.datetime | None  # timezone-aware UTC
    issue_type: str | None = None  # the organisation's issue type (Bug, Feature, Task, ...), when set
    updated_at: dt.datetime | None = None  # the time of this copy's state: orders events GitHub sent unordered

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, max_body_chars: int | None = None) -> IssueSnapshot:
        """Build from GitHub's issue object; `max_body_chars` bounds what travels in a queued job."""
        created, updated = data.get("created_at"), data.get("updated_at")
        return cls(number=int(data["number"]), title=str(data.get("title") or ""),
                   body=str(data.get("body") or "")[:max_body_chars], state=str(data.get("state") or "open"),
                   labels=tuple(str(label["name"]) for label in data.get("labels") or () if "name" in label),
                   is_pull_request=data.get("pull_request") is not None,
                   author_login=(data.get("user") or {}).get("login"),
                   created_at=parse_github_time(created) if created else None,
                   issue_type=(data.get("type") or {}).get("name"),
                   updated_at=parse_github_time(updated) if updated else None)

    def to_job(self) -> dict[str, Any]:
        """Plain values for a job's arguments (readable by any version of this code)."""
        plain = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # flat: no deep copy
        plain["labels"] = list(self.labels)
        for name in ("created_at", "updated_at"):
            moment = getattr(self, name)
            plain[name] = moment.isoformat() if moment else None
        return plain

    @classmethod
    def from_job(cls, data: Mapping[str, Any]) -> IssueSnapshot:
        """The inverse of `to_job`. A job's copy whose text is gone (`has_text`) gets empty text."""
        times = {name: parse_github_time(data[name]) if data.get(name) else None
                 for name in ("created_at", "updated_at")}
        return cls(**{"title": "", "body": "", **data, "labels": tuple(data.get("labels") or ()), **times})

    def is_current(self, now: dt.datetime, *, max_age_seconds: float, max_body_chars: int) -> bool:
        """Whether this copy (a delivery's) may stand for the issue as GitHub has it `now`.

        It may when GitHub wrote it (`updated_at`) less than `max_age_seconds` ago and its body was not cut
        for the queue. An old copy is a redelivery, a retry or a long queue: the issue may have been
        edited, labelled, closed or transferred since, so it is read again.
        """
        if self.updated_at is None or len(self.body) >= max_body_chars:
            return False
        return (now - self.updated_at).total_seconds() < max_age_seconds


def has_text(job_copy: Mapping[str, Any]) -> bool:
    """Whether a job's copy of the issue (`to_job`) still has its title and body: the text travels beside
    the job (core.queues.JOB_TEXT_KEY) and is gone once the job failed, was retried or was rescheduled."""
    return "title" in job_copy and "body" in job_copy


def parse_github_time(value: str | dt.datetime) -> dt.datetime:
    """GitHub's ISO 8601 ("2019-05-15T15:20:18Z") as an aware datetime."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def event_time(snapshot: IssueSnapshot | None, received_at: str | None,
               *github_objects: Mapping[str, Any] | None) -> dt.datetime | None:
    """When an event happened: the one rule, for the replay age limit (bot.intake.webhooks, on the delivery's JSON)
    and for the order of an issue's events (core.store.accepts_event, on the job's snapshot).

    The newest `updated_at` GitHub wrote in the delivery (the snapshot's, and each of `github_objects`': the
    payload's issue and comment), else the delivery's arrival, in UTC; None when neither is known. A stamp
    that is not a time cannot date the event.
    """
    stamps = [snapshot.updated_at] if snapshot is not None and snapshot.updated_at is not None else []
    for data in github_objects:
        try:
            stamps.append(parse_github_time(data["updated_at"]))
        except (TypeError, KeyError, ValueError):  # absent, None, or not a time
            continue
    if not stamps and received_at:
        stamps = [parse_github_time(received_at)]
    # in UTC: SQLite keeps no offset, so a "+02:00" stored as is would read back two hours off
    return max(stamps).astimezone(dt.timezone.utc) if stamps else None
