"""Repositories and installations over time: renamed, transferred, made private, removed, suspended, purged.

A repository is GitHub's id; its name follows renames and transfers (core.store.ensure_repository moves
its model scope too). Removing an installation or a repository purges what we hold of it: issues,
predictions, label events, its models and their directories. A suspended installation is frozen: its
data is kept, nothing of it is labelled or trained on until it is unsuspended.

What such an event claims is checked with GitHub first (GitHubNow): its signature covers the body, and
the body's replay marker lasts 3 days, so a captured `installation_repositories.removed` or
`repository.publicized` could be sent again later to purge a repository or share a private one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from redis import Redis
from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from bot.lifecycle import redis_copies
from core import store
from core.tables import (
    Installation,
    IssueRecord,
    LabelEvent,
    MemoryEntry,
    ModelPromotion,
    ModelVersion,
    OwnLabelDecision,
    OwnLabelExample,
    OwnLabelFit,
    Prediction,
    Repository,
    TrainingRun,
    utcnow,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Purged:
    """What a purge removed: counts for the log (never content) and model directories to delete."""

    repositories: int = 0
    issues: int = 0
    predictions: int = 0
    label_events: int = 0
    model_versions: int = 0
    directories: list[Path] = dataclasses.field(default_factory=list)
    # (full name, GitHub id) of each repository purged: what Redis holds of it goes after the commit too
    names: list[tuple[str, int | None]] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)  # what GitHub contradicted: kept

    def add(self, other: Purged) -> None:
        for field in dataclasses.fields(self):  # counts summed, lists joined
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def summary(self) -> str:
        purged = (f"purged {self.repositories} repositories: {self.issues} issues, {self.predictions} "
                  f"predictions, {self.label_events} label events, {self.model_versions} model versions")
        return purged + "".join(f"; refused: {why}" for why in self.refused)


class GitHubNow(Protocol):
    """What GitHub says now, asked as the App before an installation or repository event is acted on
    (bot.github_api.client.GitHubApp; None in dry-run, where events are believed as sent)."""

    def installation_state(self, installation_id: int) -> str | None:
        """"active", "suspended", or None when GitHub has no such installation."""

    def repository_installation(self, repo: str) -> int | None:
        """The installation that covers `repo` now; None when none of ours does."""

    def repository(self, installation_id: int, repo: str) -> dict[str, Any] | None:
        """{"repo", "repo_id", "private"} as the installation sees it now; None when it cannot."""


def update_repository(session: Session, event: dict, github: GitHubNow | None = None) -> str:
    """repository.renamed / transferred / privatized / publicized: the row follows GitHub's repository id.

    Its visibility is what GitHub shows now: a visibility event GitHub does not confirm changes nothing, and
    a rename it does not confirm (yet: GitHub may be slow to answer for a new name) keeps the stored
    visibility, private for a repository never seen (the event's own word only in dry-run)."""
    if github is not None and event.get("installation_id"):
        now = github.repository(event["installation_id"], event["repo"])
        if now is not None and now["repo_id"] == event["repo_id"]:
            event = event | {"repo": now["repo"], "private": now["private"]}
        elif event["action"] in ("privatized", "publicized"):
            log.warning("ignored repository.%s of GitHub id %s: GitHub does not confirm it", event["action"],
                        event["repo_id"])
            return f"{event['action']}: ignored, GitHub does not confirm it"
        else:
            known = store.find_repository(session, github_id=event["repo_id"])
            event = event | {"private": known.private if known is not None and known.private is not None
                             else True}
    repository = store.find_repository(session, github_id=event["repo_id"])
    before = repository.full_name if repository else None
    repository = store.ensure_repository(session, event["repo"], event.get("installation_id"),
                                         github_id=event["repo_id"], private=event["private"])
    if before and before != repository.full_name:
        return f"{event['action']}: history and models follow the repository"
    return f"{event['action']}: recorded ({'private' if repository.private else 'public'})"


def is_suspended(installation: Installation | None) -> bool:
    """True when the installation is suspended: nothing of it is labelled (None: not known, so not)."""
    return installation is not None and installation.suspended_at is not None


def suspend_installation(session: Session, installation_id: int, *, suspended: bool,
                         github: GitHubNow | None = None) -> str:
    """installation.suspend / unsuspend: freeze or thaw, as GitHub says the installation is now; data stays."""
    if github is not None:
        state = github.installation_state(installation_id)
        if state is None:
            return "ignored: GitHub has no such installation"
        if suspended != (state == "suspended"):
            log.warning("installation %s is %s on GitHub: a %s event was not believed", installation_id,
                        state,
                        "suspend" if suspended else "unsuspend")
        suspended = state == "suspended"
    installation = store.ensure_installation(session, installation_id)
    installation.suspended_at = utcnow() if suspended else None
    log.info("installation %s %s", installation_id, "suspended: frozen" if suspended else "unsuspended")
    return "frozen: nothing is labelled or trained on" if suspended else "unfrozen"


def remove_installation(session: Session, installation_id: int, model_dir: Path,
                        github: GitHubNow | None = None) -> Purged:
    """installation.deleted: purge every repository of the installation and mark it removed, once GitHub
    confirms it has no such installation."""
    if github is not None and github.installation_state(installation_id) is not None:
        log.warning("installation %s still exists on GitHub: its deletion event was not believed",
                    installation_id)
        return Purged(refused=[f"installation {installation_id} still exists on GitHub"])
    installation = store.ensure_installation(session, installation_id)
    installation.removed_at = utcnow()
    repositories = session.scalars(select(Repository).where(Repository.installation_id == installation_id))
    return purge(session, list(repositories), model_dir)


def remove_repositories(session: Session, installation_id: int, repositories: Iterable[dict],
                        model_dir: Path, github: GitHubNow | None = None) -> Purged:
    """installation_repositories.removed: purge the repositories named (by GitHub's id, else by name) that
    GitHub confirms the installation no longer covers (asked by the name we hold: it follows renames)."""
    found = [store.find_repository(session, github_id=r.get("repo_id")) or
             store.find_repository(session, full_name=r["repo"]) for r in repositories]
    found = [r for r in found if r is not None and r.installation_id in (None, installation_id)]
    still = [r for r in found
             if github is not None and github.repository_installation(r.full_name) == installation_id]
    for repository in still:
        log.warning("repository row %s is still in installation %s on GitHub: its removal was not believed",
                    repository.id, installation_id)
    purged = purge(session, [r for r in found if r not in still], model_dir)
    purged.refused += [f"{r.full_name} is still in installation {installation_id} on GitHub" for r in still]
    return purged


def purge(session: Session, repositories: list[Repository], model_dir: Path) -> Purged:
    """Delete the rows of these repositories and their models; the caller deletes `directories` after commit."""
    purged = Purged()
    for repository in repositories:
        purged.add(_purge_one(session, repository, Path(model_dir)))
    return purged


def _purge_one(session: Session, repository: Repository, model_dir: Path) -> Purged:
    issue_ids = select(IssueRecord.id).where(IssueRecord.repository_id == repository.id)
    versions = list(session.scalars(select(ModelVersion).where(ModelVersion.scope == repository.full_name)))
    version_ids = [version.id for version in versions]
    # a registered path outside MODEL_DIR is the operator's own copy: never deleted by a webhook
    ours = [Path(v.path) for v in versions if Path(v.path).resolve().is_relative_to(model_dir.resolve())]
    purged = Purged(repositories=1, model_versions=len(versions), directories=ours,
                    names=[(repository.full_name, repository.github_id)])
    _delete(session, MemoryEntry, MemoryEntry.repository_id == repository.id)  # embeddings of its issues
    prediction_ids = select(Prediction.id).where(Prediction.issue_id.in_(issue_ids))
    _delete(session, OwnLabelDecision, OwnLabelDecision.prediction_id.in_(prediction_ids))
    _delete(session, OwnLabelExample, OwnLabelExample.issue_id.in_(issue_ids))  # its own labels' examples
    _delete(session, OwnLabelFit, OwnLabelFit.repository_id == repository.id)  # and what was fitted on them
    purged.predictions = _delete(session, Prediction, Prediction.issue_id.in_(issue_ids))
    purged.label_events = _delete(session, LabelEvent, LabelEvent.issue_id.in_(issue_ids))
    purged.issues = _delete(session, IssueRecord, IssueRecord.repository_id == repository.id)
    _forget_versions(session, repository.full_name, version_ids)
    log.info("purged repository row %s (GitHub id %s, installation %s): %s", repository.id, repository.github_id,
             repository.installation_id, purged.summary().split(": ", 1)[1])
    session.delete(repository)
    session.flush()
    return purged


def _forget_versions(session: Session, scope: str, version_ids: list[int]) -> None:
    # other rows may point at these versions (a prediction they made, a run that compared them)
    session.execute(update(Prediction).where(Prediction.model_version_id.in_(version_ids))
                    .values(model_version_id=None))
    for column in (TrainingRun.challenger_version_id, TrainingRun.champion_version_id):
        session.execute(update(TrainingRun).where(column.in_(version_ids)).values({column.key: None}))
    _delete(session, TrainingRun, TrainingRun.scope == scope)
    _delete(session, ModelPromotion, or_(ModelPromotion.scope == scope,
                                         ModelPromotion.model_version_id.in_(version_ids)))
    _delete(session, ModelVersion, ModelVersion.id.in_(version_ids))


def _delete(session: Session, table, where) -> int:
    return session.execute(delete(table).where(where).execution_options(synchronize_session=False)).rowcount


def delete_directories(purged: Purged, redis: Redis | None = None) -> None:
    """Remove the purged models' directories and what Redis holds of the repositories (after the rows are
    gone for good)."""
    for directory in purged.directories:
        if directory.is_dir():  # a directory deleted by hand is already what we want
            shutil.rmtree(directory)
    if redis is not None:
        redis_copies.forget_repositories(redis, purged.names)


def clear_unconfirmed(session: Session, *, older_than_days: int, now: dt.datetime | None = None) -> int:
    """Retention: clear the title and body of issues nobody confirmed a label for, last seen that long ago."""
    cutoff = (now or utcnow()) - dt.timedelta(days=older_than_days)
    seen = func.coalesce(IssueRecord.last_event_at, IssueRecord.opened_at)
    own = select(OwnLabelExample.issue_id)  # an own label confirmed is a label too: the memory embeds it
    result = session.execute(update(IssueRecord).where(and_(
        IssueRecord.confirmed_label.is_(None), IssueRecord.id.not_in(own), seen < cutoff,
        or_(IssueRecord.title != "", IssueRecord.body != "")))
        .values(title="", body="").execution_options(synchronize_session=False))
    log.info("retention: cleared the text of %d unconfirmed issues older than %d days", result.rowcount,
             older_than_days)
    return result.rowcount
