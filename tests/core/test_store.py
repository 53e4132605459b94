"""core.store's delivery record: every job ends by writing it, in one statement."""

import pytest

from core import store
from core.db import Base, make_sessionmaker, session_scope
from core.tables import WebhookDelivery
from tests.sql_statements import statements


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_sessions(request, tmp_path):
    """Sessions on SQLite and on a fresh PostgreSQL database: the upsert is each dialect's own."""
    url = f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else request.getfixturevalue(
        "postgres_url")
    factory = make_sessionmaker(url)
    Base.metadata.create_all(factory.kw["bind"])
    yield factory
    factory.kw["bind"].dispose()


def test_a_delivery_is_recorded_in_one_statement_and_a_later_outcome_keeps_its_first_time(any_sessions):
    with statements(any_sessions) as seen, session_scope(any_sessions) as session:
        store.mark_delivery_processed(session, "d-1", "label_issue", "opened", "rescheduled")
    assert [sql.split()[0] for sql in seen] == ["INSERT"]
    with session_scope(any_sessions) as session:
        first = session.get(WebhookDelivery, "d-1").processed_at

    with session_scope(any_sessions) as session:
        store.mark_delivery_processed(session, "d-1", "label_issue", "opened", "applied")

    with session_scope(any_sessions) as session:
        assert store.is_delivery_processed(session, "d-1")
        row = session.get(WebhookDelivery, "d-1")
        assert (row.event, row.action, row.outcome, row.processed_at) == ("label_issue", "opened", "applied", first)
        assert session.query(WebhookDelivery).count() == 1


def test_a_row_the_session_holds_shows_the_outcome_recorded(any_sessions):
    with session_scope(any_sessions) as session:
        store.mark_delivery_processed(session, "d-1", "label_issue", "opened", "rescheduled")
    with session_scope(any_sessions) as session:
        held = session.get(WebhookDelivery, "d-1")
        store.mark_delivery_processed(session, "d-1", "label_issue", "opened", "applied")
        assert held.outcome == "applied"
