"""The SQL statements a block of code runs: for tests that count reads (one memory read per job, a stored
fit read as stored)."""

from __future__ import annotations

import contextlib

from sqlalchemy import event


@contextlib.contextmanager
def statements(sessions):
    """The SQL run on the sessions' engine inside the block, in order."""
    engine, seen = sessions.kw["bind"], []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)
