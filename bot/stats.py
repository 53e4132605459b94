"""Live quality: what became of the bot's suggestions, per repository, overall and recently."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.tables import IssueRecord, Prediction, Repository, utcnow

RECENT_DAYS = 30


def live_stats(session: Session, repo: str | None = None, *, now: dt.datetime | None = None) -> dict:
    """{repo: {"all": counts, "last_30_days": counts}}; counts include live precision."""
    query = select(Repository.full_name, Prediction).join(IssueRecord, Prediction.issue_id == IssueRecord.id) \
        .join(Repository, IssueRecord.repository_id == Repository.id)
    if repo:
        query = query.where(Repository.full_name == repo)
    since = (now or utcnow()) - dt.timedelta(days=RECENT_DAYS)
    rows: dict[str, list[Prediction]] = {}
    for name, prediction in session.execute(query):
        rows.setdefault(name, []).append(prediction)
    return {name: {"all": summarize(found),
                   f"last_{RECENT_DAYS}_days": summarize([p for p in found if as_utc(p.created_at) >= since])}
            for name, found in sorted(rows.items())}


def summarize(predictions: list[Prediction]) -> dict:
    """What became of these predictions; live precision is the share of the judged labels humans kept."""
    outcomes = Counter(p.outcome for p in predictions)
    decisions = Counter(p.decision for p in predictions if p.applied and p.decision)
    judged = decisions["accepted"] + decisions["rejected"] + decisions["corrected"]
    return {"suggestions": outcomes["applied"] + outcomes["suggested"], "accepted": decisions["accepted"],
            "rejected": decisions["rejected"], "corrected": decisions["corrected"],
            "abstained": outcomes["abstained"], "awaiting_review": outcomes["applied"] - judged,
            "judged": judged, "live_precision": decisions["accepted"] / judged if judged else None}


def as_utc(moment: dt.datetime) -> dt.datetime:
    # SQLite hands back naive datetimes; every timestamp we write is UTC
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def format_table(stats: dict) -> str:
    header = f"{'repository':32} {'window':14} {'sugg':>5} {'acc':>5} {'rej':>5} {'corr':>5} {'abst':>5} {'precision':>9}"
    lines = [header, "-" * len(header)]
    for repo, windows in stats.items():
        for window, c in windows.items():
            precision = "-" if c["live_precision"] is None else f"{c['live_precision']:.3f}"
            lines.append(f"{repo:32} {window:14} {c['suggestions']:>5} {c['accepted']:>5} {c['rejected']:>5} "
                         f"{c['corrected']:>5} {c['abstained']:>5} {precision:>9}")
    return "\n".join(lines)
