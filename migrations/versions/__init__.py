"""The revisions, one module each; Alembic skips this file."""
