"""`X-Hub-Signature-256`: HMAC-SHA256 of the raw body, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign_body(secret: str, body: bytes) -> str:
    """The header value GitHub sends for `body` signed with `secret`."""
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """True only when `header` is the exact signature of `body`; never raises on a malformed header."""
    if not header or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign_body(secret, body).encode(), header.strip().encode())
