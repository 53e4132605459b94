"""GitHub's X-Hub-Signature-256 check: HMAC-SHA256 of the raw body, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign_body(body: bytes, secret: str) -> str:
    """The header value GitHub sends for `body` (used by tests and the benches)."""
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(body: bytes, header: str | None, secret: str) -> bool:
    """True when `header` is GitHub's signature of `body`; False for anything else, never an exception."""
    # GitHub's header is ASCII hex; compare_digest raises TypeError on non-ASCII str (the server hands
    # header bytes over as latin-1 text), so such a header is simply wrong.
    if not header or not header.isascii() or not header.startswith(PREFIX) or not secret:
        return False
    return hmac.compare_digest(sign_body(body, secret), header)
