"""Live quality: what became of the bot's suggestions, per repository, overall and recently."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.store import as_utc
from core.tables import IssueRecord, Prediction, Repository, utcnow

RECENT_DAYS = 30
UNWRITTEN = ("suggested", "shadow")  # outcomes of a label chosen and shown on the review page, not written


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


def has_chosen_label(prediction: Prediction) -> bool:
    """The bot chose a label a human can judge: it wrote it, or (suggest or shadow mode) it would have."""
    return prediction.applied or (prediction.label is not None and prediction.outcome in UNWRITTEN)


def summarize(predictions: list[Prediction]) -> dict:
    """What became of these predictions; live precision is the share of the judged labels humans kept.

    A label the bot chose without writing it (suggest mode, shadow mode) is judged like a written one: in
    shadow mode that is the precision the bot would have had, had it written."""
    chosen = [p for p in predictions if has_chosen_label(p)]
    outcomes = Counter(p.outcome for p in predictions)
    decisions = Counter(p.decision for p in chosen if p.decision)
    judged = decisions["accepted"] + decisions["rejected"] + decisions["corrected"]
    unwritten = sum(not p.applied for p in chosen)
    shadow_abstained = sum(p.outcome == "shadow" and p.label is None for p in predictions)
    return {"suggestions": len(chosen), "accepted": decisions["accepted"],
            "rejected": decisions["rejected"], "corrected": decisions["corrected"],
            "abstained": outcomes["abstained"] + shadow_abstained, "awaiting_review": len(chosen) - judged,
            "judged": judged, "live_precision": decisions["accepted"] / judged if judged else None,
            "not_written": unwritten}


def format_precision(precision: float | None, judged: int) -> str:
    """"67 % of 3": a share means little without the number of decisions it is of."""
    return "-" if precision is None else f"{100 * precision:.0f} % of {judged}"


def format_table(stats: dict) -> str:
    """One line per repository and window; "unwr" counts the labels chosen but not written (suggest or
    shadow mode), whose decisions count like the written ones'."""
    header = (f"{'repository':32} {'window':14} {'sugg':>5} {'unwr':>5} {'acc':>5} {'rej':>5} {'corr':>5} "
              f"{'abst':>5} {'live precision':>15}")
    lines = [header, "-" * len(header)]
    for repo, windows in stats.items():
        for window, c in windows.items():
            lines.append(f"{repo:32} {window:14} {c['suggestions']:>5} {c['not_written']:>5} "
                         f"{c['accepted']:>5} {c['rejected']:>5} {c['corrected']:>5} {c['abstained']:>5} "
                         f"{format_precision(c['live_precision'], c['judged']):>15}")
    return "\n".join(lines)
