"""Small query functions over the App's tables; each takes the Session it works in."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.tables import (
    GLOBAL_SCOPE,
    Installation,
    IssueRecord,
    ModelPromotion,
    ModelVersion,
    Prediction,
    Repository,
    WebhookDelivery,
)


def serving_model_version(session: Session, scope: str = GLOBAL_SCOPE) -> ModelVersion | None:
    """The version serving `scope` now: the target of its newest promotion."""
    promotion = _newest_promotion(session, scope)
    return promotion.model_version if promotion else None


def serving_promotion_for(session: Session, repo: str | None) -> ModelPromotion | None:
    """The promotion that makes a version serve `repo`: the repository's own, else the global one."""
    own = _newest_promotion(session, repo) if repo and repo != GLOBAL_SCOPE else None
    return own or _newest_promotion(session, GLOBAL_SCOPE)


def serving_model_for(session: Session, repo: str | None) -> ModelVersion | None:
    """The version that serves `repo`: its own promoted model, else the global one (None: none at all)."""
    promotion = serving_promotion_for(session, repo)
    return promotion.model_version if promotion else None


def _newest_promotion(session: Session, scope: str) -> ModelPromotion | None:
    return session.scalars(
        select(ModelPromotion).where(ModelPromotion.scope == scope)
        .order_by(ModelPromotion.promoted_at.desc(), ModelPromotion.id.desc()).limit(1)).first()


def ensure_installation(session: Session, installation_id: int, account_login: str | None = None) -> Installation:
    installation = session.get(Installation, installation_id)
    if installation is None:
        installation = Installation(id=installation_id, account_login=account_login)
        session.add(installation)
        session.flush()
    elif account_login and not installation.account_login:
        installation.account_login = account_login
    return installation


def ensure_repository(session: Session, full_name: str, installation_id: int | None = None) -> Repository:
    if installation_id:
        ensure_installation(session, installation_id)
    repository = session.scalars(select(Repository).where(Repository.full_name == full_name)).first()
    if repository is None:
        repository = Repository(full_name=full_name, installation_id=installation_id)
        session.add(repository)
        session.flush()
    elif installation_id and repository.installation_id != installation_id:
        repository.installation_id = installation_id
    return repository


def upsert_issue(session: Session, repository: Repository, number: int, *, title: str, body: str,
                 author_login: str | None, state: str, opened_at=None) -> IssueRecord:
    issue = session.scalars(select(IssueRecord).where(
        IssueRecord.repository_id == repository.id, IssueRecord.number == number)).first()
    if issue is None:
        issue = IssueRecord(repository_id=repository.id, number=number)
        session.add(issue)
    issue.title, issue.body, issue.author_login, issue.state = title, body, author_login, state
    if isinstance(opened_at, str):  # GitHub's ISO 8601, "2019-05-15T15:20:18Z"
        opened_at = dt.datetime.fromisoformat(opened_at.replace("Z", "+00:00"))
    if opened_at is not None:
        issue.opened_at = opened_at
    session.flush()
    return issue


def latest_prediction(session: Session, issue: IssueRecord) -> Prediction | None:
    return session.scalars(select(Prediction).where(Prediction.issue_id == issue.id)
                           .order_by(Prediction.id.desc()).limit(1)).first()


def is_delivery_processed(session: Session, delivery_id: str) -> bool:
    return session.get(WebhookDelivery, delivery_id) is not None


def mark_delivery_processed(session: Session, delivery_id: str, event: str, action: str | None,
                            outcome: str) -> None:
    session.merge(WebhookDelivery(id=delivery_id, event=event, action=action, outcome=outcome))


def processed_deliveries(session: Session, delivery_ids: Iterable[str]) -> set[str]:
    """Which of these delivery ids the worker has processed."""
    ids, found = list(delivery_ids), set()
    for start in range(0, len(ids), 500):  # bounded IN lists: SQLite caps the parameters of one query
        found.update(session.scalars(select(WebhookDelivery.id).where(
            WebhookDelivery.id.in_(ids[start:start + 500]))))
    return found
