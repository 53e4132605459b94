"""Migrations build the schema the models describe, on SQLite and on PostgreSQL, both ways."""

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

from core.db import Base
from core.migrate import alembic_config, upgrade


def assert_round_trip(url: str) -> None:
    upgrade(url)
    engine = create_engine(url)
    assert set(inspect(engine).get_table_names()) >= set(Base.metadata.tables)
    command.downgrade(alembic_config(url), "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade(url)
    # autogenerate compares the migrated schema with core.tables: any drift raises
    command.check(alembic_config(url))
    engine.dispose()


def test_sqlite_upgrade_downgrade_upgrade_without_drift(sqlite_url):
    assert_round_trip(sqlite_url)


@pytest.mark.postgres
def test_postgres_upgrade_downgrade_upgrade_without_drift(postgres_url):
    assert_round_trip(postgres_url)
