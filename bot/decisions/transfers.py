"""issues.transferred: an issue's row, predictions and decisions move to where it went.

Only into a repository of the same installation (known to us, or of the same owner): an issue moved out of the
installation's reach keeps nothing here, as if deleted; either way the old repository's memory no longer holds
it (core.memory: it would vote on issues there). Without the event's text (a retried job's), the stored text
moves with the row (bot.decisions.act stores the row and the event first).
"""

from __future__ import annotations

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from core import memory, store
from core.tables import IssueRecord, LabelEvent, MemoryEntry, OwnLabelExample, Prediction, Repository


def move(session: Session, issue: IssueRecord, source: Repository, moved: dict, state: str) -> str:
    """Where `issue` of `source` went (`moved`: the event's {"repo", "repo_id", "private", "number"}); what
    became of its row, as the job's outcome."""
    known = store.find_repository(session, github_id=moved.get("repo_id")) if moved.get("repo_id") else None
    same_owner = moved["repo"].split("/")[0].lower() == source.full_name.split("/")[0].lower()
    if not (same_owner or (known is not None and known.installation_id == source.installation_id)):
        issue.title, issue.body = "", ""
        issue.confirmed_label, issue.confirmed_at, issue.confirmed_by = None, None, None
        session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id))
        memory.forget(session, issue)
        return "transferred out of this installation: its text and label are no longer kept"
    target = store.ensure_repository(session, moved["repo"], source.installation_id,
                                     github_id=moved.get("repo_id"), private=moved.get("private"))
    there = store.find_issue(session, target, moved["number"])
    if there is None:
        issue.repository_id, issue.number, issue.state = target.id, moved["number"], state
        # its confirmed label moves too: the old repository's memory forgets it, the new one's holds it
        session.execute(update(MemoryEntry).where(MemoryEntry.issue_id == issue.id)
                        .values(repository_id=target.id).execution_options(synchronize_session=False))
        session.flush()
        return f"transferred: history and decisions moved to {target.full_name}#{moved['number']}"
    _merge_into(session, issue, there)  # the new place's `opened` was handled first
    return f"transferred: history and decisions merged into {target.full_name}#{moved['number']}"


def _merge_into(session: Session, issue: IssueRecord, there: IssueRecord) -> None:
    memory.forget(session, issue)  # its row goes; the new place's memory fill embeds `there` if confirmed
    there_own = select(OwnLabelExample.label).where(OwnLabelExample.issue_id == there.id)
    session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id,
                                                  OwnLabelExample.label.in_(there_own)))
    for table in (Prediction, LabelEvent, OwnLabelExample):
        session.execute(update(table).where(table.issue_id == issue.id).values(issue_id=there.id)
                        .execution_options(synchronize_session=False))
    if there.confirmed_label is None and issue.confirmed_label is not None:
        there.confirmed_label, there.confirmed_at, there.confirmed_by = (
            issue.confirmed_label, issue.confirmed_at, issue.confirmed_by)
    session.delete(issue)
    session.flush()
