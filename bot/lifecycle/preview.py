"""The preview: before the bot ever writes, how often the serving model agrees with the labels a
repository's maintainers already gave (its backfilled history), per kind."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.lifecycle.redis_copies import LastReport
from core.classifier import Classifier
from core.issue_text import format_issue_text
from core.kinds import kind_of_label
from core.tables import IssueRecord, Repository

REPORTS = LastReport("issue-sorter:preview:{}", ttl=7 * 24 * 3600)  # each repository's last preview
MAX_ISSUES = 1000  # the newest confirmed issues a preview reads: minutes of CPU at most
BATCH = 32


def preview(session: Session, classifier: Classifier, repo: str) -> dict:
    """Agreement of the classifier with the repository's confirmed labels, overall and per kind."""
    rows = session.execute(select(IssueRecord.title, IssueRecord.body, IssueRecord.confirmed_label)
                           .join(Repository).where(Repository.full_name == repo,
                                                   IssueRecord.confirmed_label.is_not(None))
                           .order_by(IssueRecord.id.desc()).limit(MAX_ISSUES)).all()
    totals, agreed = Counter(), Counter()
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        scores = classifier.predict([format_issue_text(title, body) for title, body, _ in chunk])
        for (_, _, confirmed), row in zip(chunk, scores, strict=True):
            kind = kind_of_label(confirmed) or confirmed
            totals[kind] += 1
            agreed[kind] += max(row, key=row.get) == kind
    return {"repo": repo, "model": classifier.version, "issues": sum(totals.values()),
            "agreement": sum(agreed.values()) / sum(totals.values()) if totals else None,
            "per_kind": {kind: {"issues": n, "agreement": agreed[kind] / n} for kind, n in sorted(totals.items())}}

