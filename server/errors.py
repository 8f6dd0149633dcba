"""HTTP errors: JSON under the API for every status, a readable message on the pages; a database
that cannot be reached is a 503 to retry, not a 500; a NUL byte in a request is refused up front."""
from __future__ import annotations

import logging

from flask import (Flask, current_app, flash, g, jsonify, redirect, render_template, request,
                   url_for)
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import BadRequest, HTTPException, InternalServerError

from .portal import request_language

API_PREFIX = "/api/"
RETRY_AFTER_SECONDS = 5
log = logging.getLogger(__name__)


def register(app: Flask) -> None:
    app.register_error_handler(HTTPException, http_error)
    app.register_error_handler(DBAPIError, database_error)
    app.register_error_handler(InternalServerError, internal_error)
    # before the blueprints' own hooks: no NUL byte reaches a query, the user's loading included
    app.before_request(refuse_nul_bytes)


def _lang() -> str:
    # also before the portal chose the request's language (a refusal up front, an outage)
    return g.get("lang") or request_language()


def _t(en: str, es: str) -> str:
    return es if _lang() == "es" else en


def http_error(exc: HTTPException):
    if request.path.startswith(API_PREFIX):
        headers = [(k, v) for k, v in exc.get_headers() if k.lower() != "content-type"]
        return jsonify(error=exc.description), exc.code, headers
    if exc.code == 413:
        # the upload was refused before any view ran (reading the form for its CSRF token)
        limit = current_app.config["MAX_UPLOAD_KB"]
        flash(_t(f"The file or the pasted code is larger than {limit} KB.",
                 f"El archivo o el código pegado supera los {limit} KB."), "error")
        return redirect(request.referrer or url_for("portal.index"), 303)
    return exc


def database_error(exc: DBAPIError):
    if not (isinstance(exc, OperationalError) or exc.connection_invalidated):
        raise exc  # a fault of ours, not an outage: logged and answered as a 500
    log.warning("database unreachable: %s", exc.orig)
    message = _t("The database cannot be reached just now; try again in a few seconds.",
                 "No se puede acceder a la base de datos ahora; inténtalo en unos segundos.")
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if request.path.startswith(API_PREFIX):
        return jsonify(error=message), 503, headers
    return render_template("unavailable.html", message=message), 503, headers


def internal_error(exc: InternalServerError):
    if request.path.startswith(API_PREFIX):
        return jsonify(error=_t("Internal server error; the error was logged.",
                                "Error interno del servidor; el error quedó registrado.")), 500
    return exc


def refuse_nul_bytes() -> None:
    """A NUL byte reaches no database: PostgreSQL refuses it in text (a DataError, a 500)."""
    fields = [*(request.view_args or {}).items(), *request.args.items(multi=True)]
    if request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        fields += [*request.form.items(multi=True),
                   *((name, upload.filename or "") for name, upload in request.files.items(multi=True))]
    elif request.is_json:
        fields += [("JSON", text) for text in _strings(request.get_json(silent=True))]
    for name, value in fields:
        if isinstance(value, str) and "\x00" in value:
            raise BadRequest(_t(f"The field '{name}' contains a NUL byte (\\0); remove it.",
                                f"El campo '{name}' contiene un byte NUL (\\0); quítalo."))


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
