"""Installations and repositories over time: backfill and preview on install, renames, removals, suspension, purge."""
