"""Apply Alembic migrations from code (`issue-sorter migrate`, `issue-sorter run`, tests)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url


def alembic_config(database_url: str) -> Config:
    """The Alembic config for `database_url`, with the scripts of the installed `migrations` package."""
    # built in code, not read from alembic.ini: an installed package has no checkout around it, so
    # migrations are found from any directory (alembic.ini stays for developers who run `alembic`)
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    config.set_main_option("path_separator", "os")
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")  # as alembic.ini: 0002_add_x.py
    config.attributes["database_url"] = database_url
    config.attributes["configure_logging"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)  # SQLite makes the file, not its folder
    command.upgrade(alembic_config(database_url), revision)


class DatabaseNotReady(RuntimeError):
    """The database is unreachable or lacks the App's tables: commands say so before doing any work."""


def require_tables(database_url: str, tables: tuple[str, ...] = ("model_versions", "issues")) -> None:
    """Fail fast, naming the fix, when the database is unreachable or not migrated: before any training."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import OperationalError

    from core.db import make_engine

    url = make_url(database_url)
    shown = url.render_as_string(hide_password=True)
    fix = "run `issue-sorter migrate` first (`make run` does it for you)"
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
            and not Path(url.database).is_file():
        raise DatabaseNotReady(f"there is no database at {url.database}: {fix}")  # and do not create one
    engine = make_engine(database_url)
    try:
        missing = [table for table in tables if not inspect(engine).has_table(table)]
    except OperationalError as error:
        raise DatabaseNotReady(f"cannot reach the database {shown}: {error.orig}") from error
    finally:
        engine.dispose()
    if missing:
        raise DatabaseNotReady(f"the database {shown} has no {', '.join(missing)} table: {fix}")
