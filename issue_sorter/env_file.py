"""`.env`: the settings `issue-sorter setup` writes, read by every command from the directory it runs in.

A variable the environment sets wins over the file, so a deployment's own environment (compose, systemd) is
never overridden by a stale file.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path

ENV_FILE = Path(".env")


def read_env(path: Path = ENV_FILE) -> dict[str, str]:
    """The settings a `.env` file holds (python-dotenv's parser; missing file: none)."""
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None} if path.is_file() else {}


def fill_from_env_file(environ: MutableMapping[str, str], path: Path = ENV_FILE) -> bool:
    """Set what `path` holds where `environ` leaves it unset or empty; whether the file was there."""
    values = read_env(path)
    for key, value in values.items():
        if not environ.get(key):
            environ[key] = value
    return path.is_file()
