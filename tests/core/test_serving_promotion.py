"""core.store.serving_promotion_for: which promotion serves a repository, asked by every labelling job."""

from __future__ import annotations

import datetime as dt

from core import store
from core.db import session_scope
from core.tables import GLOBAL_SCOPE, ModelPromotion, ModelVersion
from tests.sql_statements import statements

REPO = "octo-org/hello"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def promote(session, scope: str, version: str, minutes: int) -> None:
    row = ModelVersion(version=version, scope=scope, path=f"/models/{version}", labels=["bug", "feature"])
    session.add(row)
    session.flush()
    session.add(ModelPromotion(scope=scope, model_version_id=row.id, reason="test",
                               promoted_at=T0 + dt.timedelta(minutes=minutes)))
    session.flush()


def serving(sessions, repo: str | None) -> tuple[str | None, int]:
    """The version serving `repo`, and the SQL statements it took, its version's row included."""
    with session_scope(sessions) as session, statements(sessions) as seen:
        promotion = store.serving_promotion_for(session, repo)
        return (promotion.model_version.version if promotion else None), len(seen)


def test_nothing_promoted_serves_nothing(sessions):
    assert serving(sessions, REPO) == (None, 1)


def test_a_repository_without_its_own_model_is_served_by_the_newest_global_one(sessions):
    with session_scope(sessions) as session:
        promote(session, GLOBAL_SCOPE, "global-1", 0)
        promote(session, GLOBAL_SCOPE, "global-2", 5)
        promote(session, "other/repo", "other-1", 9)  # another repository's model never serves this one
    assert serving(sessions, REPO) == ("global-2", 1)
    assert serving(sessions, None) == ("global-2", 1)


def test_a_repositorys_own_model_serves_it_even_when_a_global_one_is_newer(sessions):
    with session_scope(sessions) as session:
        promote(session, REPO, "own-1", 0)
        promote(session, REPO, "own-2", 1)
        promote(session, GLOBAL_SCOPE, "global-1", 5)
    assert serving(sessions, REPO) == ("own-2", 1)
    assert serving(sessions, "other/repo") == ("global-1", 1)


def test_of_two_promotions_at_the_same_instant_the_later_row_serves(sessions):
    with session_scope(sessions) as session:
        promote(session, REPO, "own-1", 0)
        promote(session, REPO, "own-2", 0)  # a rollback within the clock's resolution
    assert serving(sessions, REPO)[0] == "own-2"
