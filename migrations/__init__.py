"""Alembic's scripts, shipped as a package so that an installed issue-sorter finds them (core.migrate)."""
