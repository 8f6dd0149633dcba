"""HTTP errors: JSON under the API for every status; on the pages, a page of the site in the
reader's language that says what to do and leads back (an expired form included); a database
that cannot be reached is a 503 to retry, not a 500; a NUL byte in a request is refused up front,
and JSON nested too deep to parse is malformed like any other."""

from __future__ import annotations

import logging

from flask import (
    Flask,
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.json.provider import DefaultJSONProvider
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import (
    BadRequest,
    ClientDisconnected,
    HTTPException,
    InternalServerError,
    RequestEntityTooLarge,
)

from server.core.config import app_settings
from server.web.auth import kept_page, needs_login, page_sent_from, session_ended
from server.web.i18n import request_language
from server.web.roster import too_large as roster_too_large
from server.web.submissions import too_large

API_PREFIX = "/api/"
# where a request too large gets the limit of a file sent there (the others, the request's)
SUBMISSION_ENDPOINTS = ("portal.submit", "api.create_submission")
ROSTER_ENDPOINTS = ("roster.upload", "roster.apply")
RETRY_AFTER_SECONDS = 5
log = logging.getLogger(__name__)
# an error page's title and what the reader can do about it
PAGES = {
    400: (
        _l("The request could not be understood"),
        _l("Something in it was malformed; go back and try again."),
    ),
    403: (_l("Not allowed"), _l("Your account may not open this page.")),
    404: (
        _l("Page not found"),
        _l("There is no such page, or it is not yours to see; check the address."),
    ),
    405: (
        _l("Not possible here"),
        _l(
            "This address does not take that kind of request; use the links and buttons "
            "of the pages."
        ),
    ),
    500: (
        _l("Something went wrong on our side"),
        _l("The error was logged and will be looked into; try again in a moment."),
    ),
}
OTHER = (_l("The request could not be completed"), _l("Go back and try again."))
# Flask-WTF's reasons for refusing a form, in the reader's language
CSRF_REASONS = {
    "The CSRF token is missing.": _l("The CSRF token is missing."),
    "The CSRF session token is missing.": _l("The CSRF session token is missing."),
    "The CSRF token has expired.": _l("The CSRF token has expired."),
    "The CSRF token is invalid.": _l("The CSRF token is invalid."),
    "The CSRF tokens do not match.": _l("The CSRF tokens do not match."),
    "The referrer header is missing.": _l("The referrer header is missing."),
    "The referrer does not match the host.": _l("The referrer does not match the host."),
}


class DeepJSONIsMalformed(DefaultJSONProvider):
    """A body nested deeper than the parser can recurse raises RecursionError, which Werkzeug
    does not catch (a 500): as a ValueError it is a malformed body, None to get_json(silent=True)
    and a 400 otherwise, on every route."""

    def loads(self, s, **kwargs):
        try:
            return super().loads(s, **kwargs)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None


def register(app: Flask) -> None:
    app.json = DeepJSONIsMalformed(app)
    app.register_error_handler(HTTPException, http_error)
    app.register_error_handler(DBAPIError, database_error)
    app.register_error_handler(InternalServerError, internal_error)
    app.register_error_handler(CSRFError, csrf_error)
    # before the blueprints' own hooks: no NUL byte reaches a query, the user's loading included
    app.before_request(refuse_nul_bytes)


def http_error(exc: HTTPException):
    if exc.code == 413:
        return request_too_large()
    if request.path.startswith(API_PREFIX):
        headers = [(k, v) for k, v in exc.get_headers() if k.lower() != "content-type"]
        return jsonify(error=exc.description), exc.code, headers
    return error_page(exc)


def request_too_large():
    """A request over MAX_CONTENT_LENGTH (app.py), refused before any view ran (reading the form
    for its CSRF token or NUL bytes): the limit of what was sent, in the reader's language, and
    on a page the one it was sent from (the exercise of a submission: what was pasted is lost
    with the body), or the portal's first page when the Referer names no page of this site."""
    discard_body(2 * current_app.config["MAX_CONTENT_LENGTH"])
    message = _too_large_message()
    if request.path.startswith(API_PREFIX):
        return jsonify(error=message), 413
    flash(message, "error")
    if request.endpoint == "portal.submit":
        page = url_for("portal.exercise", slug=request.view_args["slug"])
        return redirect(kept_page(page), 303)
    return redirect(page_sent_from() or url_for("courses.home"), 303)


def _too_large_message() -> str:
    """A submission's or a roster's own limit (with a notebook's advice for a submission), or
    the request's."""
    upload_kb = app_settings().max_upload_kb
    if request.endpoint in SUBMISSION_ENDPOINTS:
        return str(too_large(upload_kb))
    if request.endpoint in ROSTER_ENDPOINTS:
        return roster_too_large(upload_kb)
    return _(
        "The request is larger than %(kb)s KB.", kb=current_app.config["MAX_CONTENT_LENGTH"] >> 10
    )


def discard_body(at_most: int) -> None:
    """Read what is left of the request's body and throw it away: a server that answers and
    closes a connection with unread data in it resets the connection, and a browser, still
    sending, shows "connection reset" instead of the answer. Bounded: a client that sends more
    than `at_most` gets the reset (behind nginx, none: it refuses those bodies itself)."""
    if (request.content_length or 0) > at_most:
        return
    request.max_content_length = at_most  # raised for this request: its body is read, not kept
    stream, read = request.stream, 0  # to Content-Length, from where parsing stopped if it began
    try:
        while read < at_most and (chunk := stream.read(64 << 10)):
            read += len(chunk)
    except (ClientDisconnected, RequestEntityTooLarge):
        pass  # the client went away, or a chunked body went on past its maximum


def database_error(exc: DBAPIError):
    if not (isinstance(exc, OperationalError) or exc.connection_invalidated):
        raise exc  # a fault of ours, not an outage: logged and answered as a 500
    log.warning("database unreachable: %s", exc.orig)
    message = _("The database cannot be reached just now; try again in a few seconds.")
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if request.path.startswith(API_PREFIX):
        return jsonify(error=message), 503, headers
    _page_language()
    return render_template("unavailable.html", message=message), 503, headers


def internal_error(exc: InternalServerError):
    if request.path.startswith(API_PREFIX):
        return jsonify(error=_("Internal server error; the error was logged.")), 500
    try:
        return error_page(exc)
    except Exception:  # the fault may lie in what the layout reads (the user, the database)
        log.exception("the error page failed too; Werkzeug's plain one is sent")
        return exc


def csrf_error(exc: CSRFError):
    """A form sent without its token or with a stale one (its session ended: logged out, or
    left open too long): what to do, in the reader's language, and Flask-WTF's reason."""
    message = _("The form expired; reload the page and send it again.")
    if request.path.startswith(API_PREFIX):
        return jsonify(error=message), 400
    if "user_id" not in session and needs_login():  # the cookie gone, or logged out elsewhere
        return session_ended()
    reason = CSRF_REASONS.get(exc.description, exc.description)
    return error_page(
        exc,
        title=_("The form could not be sent"),
        explanation=message,
        detail=reason,
        again=page_sent_from(),
    )


def error_page(
    exc: HTTPException,
    *,
    title: str | None = None,
    explanation: str | None = None,
    detail: str | None = None,
    again: str | None = None,
):
    """The error on a page of the site, with the way back. A description given where the error
    was raised (already in the reader's language) explains it better than the general one."""
    _page_language()
    default_title, default_explanation = PAGES.get(exc.code, OTHER)
    if explanation is None and exc.description != type(exc).description:
        explanation = exc.description
    headers = [(k, v) for k, v in exc.get_headers() if k.lower() != "content-type"]
    return (
        render_template(
            "error.html",
            code=exc.code,
            title=title or default_title,
            explanation=explanation or default_explanation,
            detail=detail,
            again=again,
        ),
        exc.code,
        headers,
    )


def _page_language() -> None:
    """<html lang> for a page answering an error: the checks that run before the portal's own
    hook (CSRF, NUL bytes, loading the user from the database) fail before it set g.lang."""
    g.setdefault("lang", request_language())


def refuse_nul_bytes() -> None:
    """A NUL byte reaches no database: PostgreSQL refuses it in text (a DataError, a 500)."""
    fields = [*(request.view_args or {}).items(), *request.args.items(multi=True)]
    if request.headers.get("Authorization", "").startswith("MUNGE "):
        # the body as sent is kept before the form is parsed: its hash binds the credential
        # (server/web/api.py)
        request.get_data(cache=True)
    if request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        fields += [
            *request.form.items(multi=True),
            *((name, upload.filename or "") for name, upload in request.files.items(multi=True)),
        ]
    elif request.is_json:
        fields += [("JSON", text) for text in _strings(request.get_json(silent=True))]
    for name, value in fields:
        if isinstance(value, str) and "\x00" in value:
            raise BadRequest(
                _("The field '%(name)s' contains a NUL byte (\\0); remove it.", name=name)
            )


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
