"""The app factory: configuration, database, Celery, CSRF and blueprints, wired together."""
from __future__ import annotations

import datetime as dt

from flask import Flask, g
from flask_wtf import CSRFProtect
from werkzeug.middleware.proxy_fix import ProxyFix

from .config import ConfigError, load_config
from .db import Database
from .queue import celery_init_app
from .results import ResultCache

csrf = CSRFProtect()


def create_app(config: dict | None = None) -> Flask:
    """Wire the portal: configuration, database, CSRF protection, blueprints. Nothing else runs."""
    settings = load_config(config)
    if not settings["SECRET_KEY"]:
        raise ConfigError("set HPCGRADE_SECRET_KEY (or SECRET_KEY in the config file)")
    app = Flask(__name__)
    # a pasted file is a form field: it may be as large as an uploaded one, and is refused by
    # the same check with the same message (not Werkzeug's, at 500 kB)
    request_limit = (settings["MAX_UPLOAD_KB"] + 64) << 10
    app.config.update(settings, MAX_CONTENT_LENGTH=request_limit,
                      MAX_FORM_MEMORY_SIZE=request_limit,
                      PERMANENT_SESSION_LIFETIME=dt.timedelta(
                          hours=settings["SESSION_LIFETIME_HOURS"]))
    if settings["TRUSTED_PROXIES"]:  # the client's address and scheme, as the proxy saw them
        proxies = settings["TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)
    app.extensions["hpcgrade.db"] = Database(settings["DATABASE_URL"])
    app.extensions["hpcgrade.results"] = ResultCache()
    csrf.init_app(app)
    celery_init_app(app)

    from . import account, api, auth, errors, headers, portal, staff, throttle
    throttle.init_app(app)
    errors.register(app)
    headers.register(app)
    app.register_blueprint(auth.blueprint)
    app.register_blueprint(account.blueprint)
    app.register_blueprint(portal.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(staff.blueprint)
    app.teardown_appcontext(_close_session)
    return app


def _close_session(_exc: BaseException | None) -> None:
    session = g.pop("db_session", None)
    if session is not None:
        session.close()
