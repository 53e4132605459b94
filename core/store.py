"""Small query functions over the App's tables; each takes the Session it works in."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import case, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, joinedload

from core.tables import (
    GLOBAL_SCOPE,
    Installation,
    IssueRecord,
    LabelEvent,
    ModelPromotion,
    ModelVersion,
    Prediction,
    Repository,
    TrainingRun,
    WebhookDelivery,
)

SCOPED_TABLES = (ModelVersion, ModelPromotion, TrainingRun)  # a repository's scope is its current full name


def serving_model_version(session: Session, scope: str = GLOBAL_SCOPE) -> ModelVersion | None:
    """The version serving `scope` now: the target of its newest promotion."""
    promotion = session.scalars(
        select(ModelPromotion).where(ModelPromotion.scope == scope)
        .order_by(ModelPromotion.promoted_at.desc(), ModelPromotion.id.desc()).limit(1)).first()
    return promotion.model_version if promotion else None


def serving_promotion_for(session: Session, repo: str | None) -> ModelPromotion | None:
    """The promotion that makes a version serve `repo`: the repository's own, else the global one, with
    its version. One query: every labelling job asks it (bot.labeling.serving), so that a promotion reaches
    running workers at their next job."""
    scopes = [repo, GLOBAL_SCOPE] if repo and repo != GLOBAL_SCOPE else [GLOBAL_SCOPE]
    return session.scalars(
        select(ModelPromotion).options(joinedload(ModelPromotion.model_version))
        .where(ModelPromotion.scope.in_(scopes))
        .order_by(case((ModelPromotion.scope == GLOBAL_SCOPE, 1), else_=0),  # the repository's own first
                  ModelPromotion.promoted_at.desc(), ModelPromotion.id.desc()).limit(1)).first()


def serving_model_for(session: Session, repo: str | None) -> ModelVersion | None:
    """The version that serves `repo`: its own promoted model, else the global one (None: none at all)."""
    promotion = serving_promotion_for(session, repo)
    return promotion.model_version if promotion else None


def ensure_installation(session: Session, installation_id: int, account_login: str | None = None) -> Installation:
    installation = session.get(Installation, installation_id)
    if installation is None:
        installation = Installation(id=installation_id, account_login=account_login)
        session.add(installation)
        session.flush()
    elif account_login and not installation.account_login:
        installation.account_login = account_login
    return installation


def ensure_repository(session: Session, full_name: str, installation_id: int | None = None, *,
                      github_id: int | None = None, private: bool | None = None) -> Repository:
    """The repository GitHub knows by `github_id` (else by name), created or brought up to date.

    A known id with a new name is a rename or transfer: the row and its model scope follow it. A name
    still held by another repository (renamed while we heard nothing) is released first, so a re-used
    name starts from nothing instead of inheriting another repository's history.
    """
    if installation_id:
        ensure_installation(session, installation_id)
    repository = find_repository(session, github_id=github_id) if github_id else None
    if repository is None:
        repository = find_repository(session, full_name=full_name)
        if repository is not None and github_id and repository.github_id not in (None, github_id):
            _release_name(session, repository)
            repository = None
    if repository is None:
        repository = Repository(full_name=full_name, installation_id=installation_id, github_id=github_id,
                                private=True if private is None else private)
        session.add(repository)
        session.flush()
        return repository
    if repository.full_name != full_name:
        rename_repository(session, repository, full_name)
    if github_id and repository.github_id is None:
        repository.github_id = github_id
    if installation_id and repository.installation_id != installation_id:
        repository.installation_id = installation_id
    if private is not None:
        repository.private = private
    return repository


def find_repository(session: Session, *, github_id: int | None = None,
                    full_name: str | None = None) -> Repository | None:
    """The repository with GitHub's id `github_id`, or (without one) with the name `full_name`."""
    where = Repository.github_id == github_id if github_id else Repository.full_name == full_name
    return session.scalars(select(Repository).where(where)).first()


def rename_repository(session: Session, repository: Repository, full_name: str) -> None:
    """Give `repository` its new name; its models, promotions and training runs follow it."""
    holder = find_repository(session, full_name=full_name)
    if holder is not None and holder.id != repository.id:
        _release_name(session, holder)
    old = repository.full_name
    repository.full_name = full_name
    session.flush()
    for table in SCOPED_TABLES:
        session.execute(update(table).where(table.scope == old).values(scope=full_name))


def _release_name(session: Session, repository: Repository) -> None:
    # until a delivery tells its new name, it is known by its id alone (a name no repository can have)
    rename_repository(session, repository, f"repo:{repository.github_id or f'row-{repository.id}'}")


def find_issue(session: Session, repository: Repository, number: int) -> IssueRecord | None:
    return session.scalars(select(IssueRecord).where(
        IssueRecord.repository_id == repository.id, IssueRecord.number == number)).first()


def accepts_event(issue: IssueRecord | None, event_at: dt.datetime | None) -> bool:
    """Whether an event of `event_at` may change this issue: none is newer and it is not deleted."""
    if issue is None:
        return True
    if issue.state == "deleted":  # terminal: a late edit never writes a deleted issue's text back
        return False
    last = as_utc(issue.last_event_at)
    return event_at is None or last is None or as_utc(event_at) >= last


def as_utc(moment: dt.datetime | None) -> dt.datetime | None:
    """An aware UTC datetime (SQLite gives back naive ones)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=dt.timezone.utc)


def upsert_issue(session: Session, repository: Repository, number: int, *, title: str | None, body: str | None,
                 author_login: str | None, state: str, opened_at=None,
                 event_at: dt.datetime | None = None) -> tuple[IssueRecord, bool]:
    """The issue's row with this event's text and state, unless a newer event was applied (see accepts_event),
    and whether this call created it: a row just created has nothing stored about it yet (no prediction, no
    label event), which a labelling job need not ask the database.

    A `title` or `body` of None (an event whose text is unknown) keeps the stored one ("" for a new row)."""
    issue = find_issue(session, repository, number)
    created = issue is None
    if created:
        issue = IssueRecord(repository_id=repository.id, number=number, title="", body="")
        session.add(issue)
    elif not accepts_event(issue, event_at):
        return issue, False
    if event_at is not None:
        issue.last_event_at = as_utc(event_at)
    issue.author_login, issue.state = author_login, state
    issue.title = issue.title if title is None else title
    issue.body = issue.body if body is None else body
    if isinstance(opened_at, str):  # GitHub's ISO 8601, "2019-05-15T15:20:18Z"
        opened_at = dt.datetime.fromisoformat(opened_at.replace("Z", "+00:00"))
    if opened_at is not None:
        issue.opened_at = opened_at
    session.flush()
    return issue, created


def latest_prediction(session: Session, issue: IssueRecord) -> Prediction | None:
    return session.scalars(select(Prediction).where(Prediction.issue_id == issue.id)
                           .order_by(Prediction.id.desc()).limit(1)).first()


def is_delivery_processed(session: Session, delivery_id: str) -> bool:
    return session.get(WebhookDelivery, delivery_id) is not None


def mark_delivery_processed(session: Session, delivery_id: str, event: str, action: str | None,
                            outcome: str) -> None:
    """Record the delivery as processed, or a later outcome of one already recorded: one INSERT ... ON
    CONFLICT, where a merge read the row first (every job ends here)."""
    values = {"event": event, "action": action, "outcome": outcome}
    # the dialect's INSERT, which has on_conflict_do_update (PostgreSQL and SQLite alike)
    insert = postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    upsert = insert(WebhookDelivery).values(id=delivery_id, **values)  # processed_at: its default
    session.execute(upsert.on_conflict_do_update(index_elements=[WebhookDelivery.id], set_=values),
                    execution_options={"synchronize_session": False})
    held = session.identity_map.get(session.identity_key(WebhookDelivery, (delivery_id,)))
    if held is not None:  # a row this session read before: it shows the new outcome, as after a merge
        session.refresh(held)


def processed_deliveries(session: Session, delivery_ids: Iterable[str]) -> set[str]:
    """Which of these delivery ids the worker has processed."""
    ids, found = list(delivery_ids), set()
    for start in range(0, len(ids), 500):  # bounded IN lists: SQLite caps the parameters of one query
        found.update(session.scalars(select(WebhookDelivery.id).where(
            WebhookDelivery.id.in_(ids[start:start + 500]))))
    return found


def removed_by_human(session: Session, issue: IssueRecord) -> set[str]:
    """Labels a human took off this issue (or its issue type): the bot never puts them back."""
    return set(session.scalars(select(LabelEvent.label).where(
        LabelEvent.issue_id == issue.id, LabelEvent.action.in_(("unlabeled", "untyped")),
        LabelEvent.actor_is_human.is_(True))))
