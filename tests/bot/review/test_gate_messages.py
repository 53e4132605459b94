"""A quality page shows the gate's word on a version from its own repository's runs and the global
scope's, never another repository's: a shared global version judged on one repository's issues once showed
that repository's message (and figures) on every quality page."""

from __future__ import annotations

import datetime as dt

from bot.review.quality import model_history
from core.db import session_scope
from core.tables import GLOBAL_SCOPE, ModelVersion, TrainingRun

ONE, TWO, THREE = "octo/one", "octo/two", "octo/three"


def test_each_repository_sees_its_own_or_the_global_gate_message(sessions):
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with session_scope(sessions) as session:
        shared = ModelVersion(version="global-1", scope=GLOBAL_SCOPE, path="/m/global-1", metrics={})
        session.add(shared)
        session.flush()
        session.add_all([
            TrainingRun(scope=GLOBAL_SCOPE, challenger_version_id=shared.id, message="global: no model served",
                        started_at=start),
            TrainingRun(scope=ONE, challenger_version_id=shared.id, message="octo/one: 0.91 on 80 issues",
                        started_at=start + dt.timedelta(hours=2))])
    with session_scope(sessions) as session:
        assert [row.gate for row in model_history(session, ONE)] == ["octo/one: 0.91 on 80 issues"]
        assert [row.gate for row in model_history(session, TWO)] == ["global: no model served"]
        session.add(TrainingRun(scope=THREE, challenger_version_id=shared.id, message="octo/three: kept out",
                                started_at=start - dt.timedelta(hours=1)))  # older than the global run
        session.flush()
        assert [row.gate for row in model_history(session, THREE)] == ["octo/three: kept out"]
        assert [row.gate for row in model_history(session, TWO)] == ["global: no model served"]
