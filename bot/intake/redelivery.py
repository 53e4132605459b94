"""The redelivery sweep: ask GitHub to resend the failed webhook deliveries we never processed.

GitHub never redelivers by itself, and our receiver answers 503 when it cannot queue a delivery. The sweep
lists the App's deliveries of GitHub's three-day window (newest first, page by page), keeps the guids none
of whose attempts succeeded and that we neither processed (core.tables.WebhookDelivery) nor queued (the
receiver's marker, bot.intake.queueing.DELIVERY_KEY), and asks GitHub to redeliver the newest attempt of each:
once per attempt (a marker in Redis that lives as long as the window), so a redelivery that failed too
(the fault was not over) is asked for again, up to MAX_REDELIVERIES a guid (a receiver that fails every
delivery is not fed forever); at most one ask a second and `limit` a sweep. `failed_deliveries` decides and is
pure; `sweep` does the I/O through the objects passed in.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, Protocol

from redis import Redis
from sqlalchemy.orm import Session, sessionmaker

from bot.github_api.client import GitHubError, PermanentGitHubError, TransientGitHubError
from bot.github_api.issues import parse_github_time
from bot.intake.queueing import DELIVERY_KEY
from core import store
from core.db import session_scope

log = logging.getLogger(__name__)

WINDOW = dt.timedelta(days=3)  # GitHub redelivers only what it delivered in the past three days
EDGE = dt.timedelta(minutes=10)  # keep clear of the window's end: a delivery about to expire may be refused
ASKED_KEY = "issue-sorter:redelivery-asked:{}"  # SET NX per "guid:attempt id": by whichever sweep came first
MAX_REDELIVERIES = 3  # asks per guid: a fault outlasting one redelivery (chaos: Redis down twice) is not a loss
ASKED_TTL_SECONDS = int(WINDOW.total_seconds())  # past the window GitHub would refuse the ask anyway
ASK_INTERVAL = 1.0  # seconds between two asks: polite towards GitHub's secondary rate limits
MAX_ASKS = 50  # asks per sweep; the rest wait for the next sweep
PER_PAGE = 100  # the most GET /app/hook/deliveries returns a page
DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


class HookDeliveries(Protocol):
    """What the sweep needs from GitHub, as the App itself (bot.github_api.client.GitHubApp)."""

    def list_deliveries_page(self, cursor: str | None = None,
                             per_page: int = PER_PAGE) -> tuple[list[dict], str | None]: ...

    def redeliver(self, delivery_id: int) -> None: ...


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One attempt of a webhook delivery as GitHub lists it; a redelivery shares its original's guid."""

    id: int  # this attempt's id: what POST /app/hook/deliveries/{id}/attempts takes
    guid: str  # X-GitHub-Delivery, the same for every attempt
    delivered_at: dt.datetime  # timezone-aware UTC
    status_code: int  # what our receiver answered; GitHub records a failure to connect as 5xx or 0
    status: str  # GitHub's words for it: "OK", "Invalid HTTP Response: 503", "failed to connect"
    event: str
    action: str | None
    redelivery: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Delivery:
        """From one item of GET /app/hook/deliveries (GitHub's "Simple webhook delivery")."""
        return cls(id=int(data["id"]), guid=str(data["guid"]), delivered_at=parse_github_time(data["delivered_at"]),
                   status_code=int(data.get("status_code") or 0), status=data.get("status") or "",
                   event=data.get("event") or "", action=data.get("action"),
                   redelivery=bool(data.get("redelivery")))

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status_code < 300

    def describe(self) -> str:
        """`<guid> (issues.opened, delivered 2026-12-01 08:00 UTC: Invalid HTTP Response: 503)`."""
        kind = f"{self.event}.{self.action}" if self.action else self.event
        status = self.status or f"HTTP {self.status_code}"
        return f"{self.guid} ({kind}, delivered {self.delivered_at:%Y-%m-%d %H:%M} UTC: {status})"


@dataclasses.dataclass
class SweepResult:
    since: dt.datetime  # the oldest delivery time looked at
    listed: int = 0  # attempts GitHub listed since then
    failed: int = 0  # guids none of whose attempts succeeded
    handled: int = 0  # of those, already processed, queued or asked for
    given_up: list[Delivery] = dataclasses.field(default_factory=list)  # MAX_REDELIVERIES asked, all failed
    asked: list[Delivery] = dataclasses.field(default_factory=list)
    refused: list[tuple[Delivery, str]] = dataclasses.field(default_factory=list)  # 4xx: never asked again
    left: int = 0  # not asked this sweep (over the cap, or the sweep stopped): the next sweep asks
    stopped: str | None = None  # why the sweep ended early; the next one carries on

    def summary(self) -> str:
        text = (f"asked GitHub to redeliver {len(self.asked)} of {self.failed} failed deliveries since "
                f"{self.since:%Y-%m-%d %H:%M} UTC ({self.handled} already handled, "
                f"{len(self.refused)} refused, {len(self.given_up)} given up after {MAX_REDELIVERIES} "
                f"redeliveries, {self.left} left for the next sweep)")
        return f"{text}; stopped: {self.stopped}" if self.stopped else text


class Ledger:
    """What we know of a delivery: processed (the database), queued (the receiver's marker), asked (ours).

    With `again`, earlier asks do not count, nor their number: an operator's try after the sweep gave up.
    """

    def __init__(self, redis: Redis, sessions: sessionmaker[Session], *, again: bool = False):
        self._redis, self._sessions, self.again = redis, sessions, again

    def handled(self, newest: Collection[Delivery]) -> set[str]:
        """The guids processed, queued, or whose newest attempt was already asked for: none needs asking."""
        guids = [delivery.guid for delivery in newest]
        with session_scope(self._sessions) as session:
            found = store.processed_deliveries(session, guids)
        pipe = self._redis.pipeline(transaction=False)
        for delivery in newest:
            pipe.exists(DELIVERY_KEY.format(delivery.guid), *(() if self.again else (_asked_key(delivery),)))
        return found | {delivery.guid for delivery, count in zip(newest, pipe.execute()) if count}

    def claim(self, delivery: Delivery, now: dt.datetime) -> bool:
        """Note that we ask for this attempt again now; False when a sweep already did."""
        return bool(self._redis.set(_asked_key(delivery), now.isoformat(), nx=not self.again,
                                    ex=ASKED_TTL_SECONDS))

    def release(self, delivery: Delivery) -> None:
        """Forget an ask GitHub did not take (it was failing): the next sweep asks again."""
        self._redis.delete(_asked_key(delivery))


def _asked_key(delivery: Delivery) -> str:
    return ASKED_KEY.format(f"{delivery.guid}:{delivery.id}")


def window_start(now: dt.datetime, since: dt.datetime | None = None) -> dt.datetime:
    """The oldest delivery time a sweep looks at: `since`, but never outside GitHub's window."""
    earliest = now - WINDOW + EDGE
    return earliest if since is None or since < earliest else since


def parse_since(text: str, now: dt.datetime) -> dt.datetime:
    """`--since`: a duration back from now ("90m", "6h", "2d", "1d12h") or an ISO 8601 time (UTC if naive)."""
    match = DURATION.fullmatch(text.strip())
    if match and any(match.groups()):
        days, hours, minutes, seconds = (int(group or 0) for group in match.groups())
        return now - dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    try:
        moment = parse_github_time(text.strip())
    except ValueError:
        raise ValueError("--since takes a duration such as 90m, 6h or 2d, or an ISO 8601 time; "
                         f"got {text!r}") from None
    if moment > now:
        raise ValueError(f"--since {text} is in the future")
    return moment


def failed_deliveries(deliveries: Iterable[Delivery], *, since: dt.datetime) -> list[Delivery]:
    """The newest attempt of each guid seen since `since` none of whose attempts succeeded; the guid
    first delivered longest ago comes first, as it is the nearest to leaving GitHub's window."""
    attempts: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        if delivery.delivered_at >= since:
            attempts.setdefault(delivery.guid, []).append(delivery)
    failed = [group for group in attempts.values() if not any(attempt.succeeded for attempt in group)]
    failed.sort(key=lambda group: min((attempt.delivered_at, attempt.id) for attempt in group))
    return [max(group, key=lambda attempt: (attempt.delivered_at, attempt.id)) for group in failed]


def list_since(github: HookDeliveries, since: dt.datetime, per_page: int = PER_PAGE) -> Iterator[Delivery]:
    """The App's deliveries from the newest back to `since`, following the Link header's cursor; it stops
    at the first page that reaches past `since` (GitHub lists newest first)."""
    cursor, seen = None, set()
    while True:
        items, cursor = github.list_deliveries_page(cursor, per_page)
        page = [Delivery.from_json(item) for item in items]
        yield from (delivery for delivery in page if delivery.delivered_at >= since)
        if not page or cursor is None or cursor in seen or min(d.delivered_at for d in page) < since:
            return
        seen.add(cursor)  # a cursor seen twice would page forever


def sweep(github: HookDeliveries, ledger: Ledger, *, now: dt.datetime | None = None,
          since: dt.datetime | None = None, limit: int = MAX_ASKS, interval: float = ASK_INTERVAL,
          sleep: Callable[[float], None] = time.sleep) -> SweepResult:
    """List, decide, ask: one sweep over GitHub's window (or from `since`, inside it); limit=0 only counts."""
    if limit < 0:
        raise ValueError(f"the number of asks per sweep cannot be negative, got {limit}")
    now = now or dt.datetime.now(dt.UTC)
    result = SweepResult(since=window_start(now, since))
    try:
        deliveries = list(list_since(github, result.since))
    except GitHubError as error:
        result.stopped = f"GitHub failed to list the deliveries: {error}"
        return result
    failed = failed_deliveries(deliveries, since=result.since)
    handled = ledger.handled(failed)
    todo = [delivery for delivery in failed if delivery.guid not in handled]
    attempts = Counter(delivery.guid for delivery in deliveries)
    if not ledger.again:  # the original attempt and MAX_REDELIVERIES of ours, all failed: stop asking
        result.given_up = [delivery for delivery in todo if attempts[delivery.guid] > MAX_REDELIVERIES]
        todo = [delivery for delivery in todo if attempts[delivery.guid] <= MAX_REDELIVERIES]
    todo.sort(key=lambda delivery: attempts[delivery.guid])  # never asked for first, then oldest first
    result.listed, result.failed, result.handled = len(deliveries), len(failed), len(failed) - len(todo)
    result.left = max(0, len(todo) - limit)
    _ask(github, ledger, todo[:limit], result, now=now, interval=interval, sleep=sleep)
    return result


def _ask(github: HookDeliveries, ledger: Ledger, todo: list[Delivery], result: SweepResult, *,
         now: dt.datetime, interval: float, sleep: Callable[[float], None]) -> None:
    for position, delivery in enumerate(todo):
        if not ledger.claim(delivery, now):  # another sweep is asking for it right now
            result.handled += 1
            continue
        if result.asked or result.refused:
            sleep(interval)
        try:
            github.redeliver(delivery.id)
        except TransientGitHubError as error:  # GitHub failing or limiting us: stop; the next sweep retries
            ledger.release(delivery)
            result.left += len(todo) - position
            result.stopped = f"GitHub failed to redeliver {delivery.guid}: {error}"
            return
        except PermanentGitHubError as error:  # gone or out of the window: asking again cannot help
            result.refused.append((delivery, str(error)))
        else:
            result.asked.append(delivery)
