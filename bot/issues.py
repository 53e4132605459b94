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

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, max_body_chars: int | None = None) -> IssueSnapshot:
        """Build from GitHub's issue object; `max_body_chars` bounds what travels in a queued job."""
        created = data.get("created_at")
        return cls(number=int(data["number"]), title=str(data.get("title") or ""),
                   body=str(data.get("body") or "")[:max_body_chars], state=str(data.get("state") or "open"),
                   labels=tuple(str(label["name"]) for label in data.get("labels") or () if "name" in label),
                   is_pull_request=data.get("pull_request") is not None,
                   author_login=(data.get("user") or {}).get("login"),
                   created_at=parse_github_time(created) if created else None,
                   issue_type=(data.get("type") or {}).get("name"))

    def to_job(self) -> dict[str, Any]:
        """Plain values for a job's arguments (readable by any version of this code)."""
        plain = dataclasses.asdict(self)
        plain["labels"] = list(self.labels)
        plain["created_at"] = self.created_at.isoformat() if self.created_at else None
        return plain

    @classmethod
    def from_job(cls, data: Mapping[str, Any]) -> IssueSnapshot:
        """The inverse of `to_job`."""
        created = data.get("created_at")
        return cls(**{**data, "labels": tuple(data.get("labels") or ()),
                      "created_at": parse_github_time(created) if created else None})


def parse_github_time(value: str | dt.datetime) -> dt.datetime:
    """GitHub's ISO 8601 ("2019-05-15T15:20:18Z") as an aware datetime."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
