"""Trainings per installation (core.quotas): how many repositories of one installation have a model of
their own, how many of its trainings run in 24 hours, and the due scopes' order, installations taking turns.

A training a quota refuses records no run, so its scope stays due and trains on a later due-retraining run.
The operator's own repositories (no installation) and the global model are not counted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from itertools import zip_longest

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.quotas import Quotas
from core.tables import GLOBAL_SCOPE, ModelPromotion, Repository, TrainingRun

DAY = dt.timedelta(days=1)


def quota_refusal(session: Session, scope: str, quotas: Quotas, now: dt.datetime | None = None) -> str | None:
    """Why `scope` may not train now under its installation's quotas, or None when it may."""
    if scope == GLOBAL_SCOPE:
        return None
    installation_id = session.scalar(select(Repository.installation_id).where(Repository.full_name == scope))
    if installation_id is None:
        return None
    scopes = select(Repository.full_name).where(Repository.installation_id == installation_id)
    since = (now or dt.datetime.now(dt.timezone.utc)) - DAY
    trained = session.scalar(select(func.count(TrainingRun.id)).where(TrainingRun.scope.in_(scopes),
                                                                     TrainingRun.started_at > since))
    if trained >= quotas.trainings_per_day:
        return (f"{scope}: not retrained now: installation {installation_id} has had {trained} trainings in the "
                f"last 24 hours, its quota (ISSUE_SORTER_MAX_TRAININGS_PER_DAY={quotas.trainings_per_day}); "
                "it stays due and trains on a later run")
    with_models = set(session.scalars(select(ModelPromotion.scope).where(ModelPromotion.scope.in_(scopes))))
    if scope not in with_models and len(with_models) >= quotas.repository_models:
        return (f"{scope}: no model of its own yet: {len(with_models)} repositories of installation "
                f"{installation_id} have one, its quota (ISSUE_SORTER_MAX_REPOSITORY_MODELS="
                f"{quotas.repository_models}); the global model serves it, and it stays due")
    return None


def fair_order(session: Session, scopes: Sequence[str]) -> list[str]:
    """`scopes` with the global one first, then installations taking turns (one repository each, in the
    order they were stored), so that fifty due repositories of one installation do not all go first."""
    installation_of = dict(session.execute(select(Repository.full_name, Repository.installation_id)
                                           .where(Repository.full_name.in_(scopes))).all())
    turns: dict[object, list[str]] = {}
    for scope in scopes:
        if scope != GLOBAL_SCOPE:
            turns.setdefault(installation_of.get(scope), []).append(scope)
    rounds = zip_longest(*turns.values())
    return [GLOBAL_SCOPE] * (GLOBAL_SCOPE in scopes) + [scope for turn in rounds for scope in turn if scope]
