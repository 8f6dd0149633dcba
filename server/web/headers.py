"""Security headers on every response: the pages load scripts and styles from this site only
(nothing inline), cannot be framed, and send no referrer to other sites."""

from __future__ import annotations

from flask import Flask, Response

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; frame-ancestors 'none'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",  # frame-ancestors, for browsers that predate it
}


def register(app: Flask) -> None:
    app.after_request(add_security_headers)


def add_security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
