"""GitHub's X-Hub-Signature-256 check: HMAC-SHA256 of the raw body, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign_body(body: bytes, secret: str) -> str:
    """The header value GitHub sends for `body` (used by tests and the replay tool)."""
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(body: bytes, header: str | None, secret: str) -> bool:
    if not header or not header.startswith(PREFIX) or not secret:
        return False
    return hmac.compare_digest(sign_body(body, secret), header)
