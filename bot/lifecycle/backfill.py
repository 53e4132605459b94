"""Backfill: a repository's existing labelled issues become training data: the kind's label (one per issue,
`training_label`) and every one of the repository's own labels it carries (core.own_labels, several).

Bounded (max_issues), polite (PyGithub's request spacing; rate limits reschedule the job at the reset
time) and resumable: the next page to read is saved after every page.
"""

from __future__ import annotations

import logging
import re

from sqlalchemy import exists, func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from core import own_labels, store
from core.db import session_scope
from core.kinds import SKIP, kind_of, kind_of_label
from core.tables import IssueRecord, OwnLabelExample, utcnow

log = logging.getLogger(__name__)
BACKFILL_DONE = 0  # Repository.backfill_next_page once every page was read
PER_PAGE = 100
BACKFILL_ACTOR = "backfill"  # IssueRecord.confirmed_by of labels read from a repository's history


def training_label(labels: tuple[str, ...]) -> str | None:
    """The one label an issue teaches: its kind's label (the lesson's rules), else a lone label;
    None for issues the lesson's rules mark as not worth learning from (duplicate, spam, ...)."""
    if any(re.search(SKIP, label.lower()) for label in labels):
        return None
    kind = kind_of(labels)
    if kind is not None:
        return next(label for label in labels if kind_of_label(label) == kind)
    return labels[0] if len(labels) == 1 else None


def history_own_labels(labels: tuple[str, ...]) -> list[str]:
    """Every one of the repository's own labels an issue of its history carries (none on an issue the
    lesson's rules do not learn from)."""
    if any(re.search(SKIP, label.lower()) for label in labels):
        return []
    return own_labels.candidates(labels)


def register_installation(session: Session, installation_id: int, account_login: str | None,
                          repositories: list[dict]) -> None:
    """Record a new installation and its repositories ({"repo", "repo_id", "private"}), before their
    backfill jobs run: GitHub's id and visibility decide whose models may learn from them."""
    store.ensure_installation(session, installation_id, account_login)
    for repository in repositories:
        store.ensure_repository(session, repository["repo"], installation_id, github_id=repository.get("repo_id"),
                                private=repository.get("private"))


def backfill(sessions: sessionmaker[Session], github, repo: str, *, installation_id: int | None,
             max_issues: int = 1000) -> str:
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, repo, installation_id)
        page = repository.backfill_next_page
        before = session.scalar(select(func.count(IssueRecord.id)).where(IssueRecord.repository_id == repository.id,
                                                                         stored_by_backfill()))
    if page == BACKFILL_DONE:
        return f"{repo}: already backfilled"
    page, stored = page or 1, before  # an interrupted run's issues count towards the bound
    while stored < max_issues:
        issues = github.list_issues_page(repo, page, PER_PAGE)
        with session_scope(sessions) as session:
            stored += store_page(session, repo, issues, max_issues - stored)
            repository = store.ensure_repository(session, repo, installation_id)
            repository.backfill_next_page = page + 1 if len(issues) == PER_PAGE else BACKFILL_DONE
        if len(issues) < PER_PAGE:
            break
        page += 1
    log.info("backfilled %d labelled issues of %s", stored - before, repo)
    return f"{repo}: {stored - before} labelled issues stored"


def stored_by_backfill():
    """The issues the backfill stored: its kind's label, or one of its own labels, read from the history."""
    return or_(IssueRecord.confirmed_by == BACKFILL_ACTOR, exists().where(
        OwnLabelExample.issue_id == IssueRecord.id, OwnLabelExample.confirmed_by == BACKFILL_ACTOR))


def is_history(issue) -> bool:
    """Whether the backfill keeps an issue of the repository's history: an issue, not a pull request, that
    teaches its kind or carries one of the repository's own labels."""
    labels = tuple(issue.labels)
    return not issue.is_pull_request and (training_label(labels) is not None or bool(history_own_labels(labels)))


def store_page(session: Session, repo: str, issues, room: int) -> int:
    """Store the issues of one page the backfill keeps (`is_history`), at most `room`; how many it stored."""
    repository = store.ensure_repository(session, repo)
    stored = 0
    for issue in issues:
        if not is_history(issue) or stored >= room:
            continue
        label, own = training_label(tuple(issue.labels)), history_own_labels(tuple(issue.labels))
        record, _ = store.upsert_issue(session, repository, issue.number, title=issue.title, body=issue.body,
                                       author_login=issue.author_login, state=issue.state, opened_at=issue.created_at)
        if label is not None and record.confirmed_label is None:  # a maintainer's later decision wins
            record.confirmed_label, record.confirmed_by, record.confirmed_at = label, BACKFILL_ACTOR, utcnow()
        for name in own:
            own_labels.confirm(session, record, name, BACKFILL_ACTOR)
        stored += 1
    return stored
