"""HTTP errors: JSON under the API, a readable message on the pages."""
from __future__ import annotations

from flask import Flask, current_app, flash, g, jsonify, redirect, request, url_for
from werkzeug.exceptions import HTTPException

API_PREFIX = "/api/"


def register(app: Flask) -> None:
    for code in (400, 401, 403, 404, 405, 413):
        app.register_error_handler(code, http_error)


def http_error(exc: HTTPException):
    if request.path.startswith(API_PREFIX):
        return jsonify(error=exc.description), exc.code
    if exc.code == 413:
        # the upload was refused before any view ran (reading the form for its CSRF token)
        limit = current_app.config["MAX_UPLOAD_KB"]
        flash(f"El archivo supera los {limit} KB." if g.get("lang") == "es"
              else f"The file is larger than {limit} KB.", "error")
        return redirect(request.referrer or url_for("portal.index"), 303)
    return exc
