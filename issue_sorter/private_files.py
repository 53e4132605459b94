"""Files and folders only their owner can read: secrets, and var/, where the local service keeps its data."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def private_dir(path: Path) -> Path:
    """`path`, created if need be, readable by its owner only (an existing one is made so)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_secret_file(path: Path, text: str) -> None:
    """Create or replace a file readable by its owner only, from its very first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT: set it
        handle.write(text)


def generated_secret(path: Path) -> str:
    """The secret kept in `path`, generated (64 hex digits) and written 0600 the first time."""
    if not path.exists():
        write_secret_file(path, secrets.token_hex(32))
    path.chmod(0o600)  # a file left by an older version may be readable by others
    return path.read_text().strip()
