"""A file's SHA-256: what a model card records of its fast artefact, and what the offline encoder's files
are checked against before they are loaded."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path | str) -> str:
    """The hex SHA-256 of the file at `path`, read by hashlib in blocks (never whole into memory)."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()
