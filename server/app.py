"""The app factory: configuration, database, Celery, CSRF and blueprints, wired together."""
from __future__ import annotations

from flask import Flask, g
from flask_wtf import CSRFProtect

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
    app.config.update(settings, MAX_CONTENT_LENGTH=(settings["MAX_UPLOAD_KB"] + 64) << 10)
    app.extensions["hpcgrade.db"] = Database(settings["DATABASE_URL"])
    app.extensions["hpcgrade.tokens"] = {}  # token digest → Bearer, see api._bearer
    app.extensions["hpcgrade.results"] = ResultCache()
    csrf.init_app(app)
    celery_init_app(app)

    from . import api, auth, errors, portal, staff
    errors.register(app)
    app.register_blueprint(auth.blueprint)
    app.register_blueprint(portal.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(staff.blueprint)
    app.teardown_appcontext(_close_session)
    return app


def _close_session(_exc: BaseException | None) -> None:
    session = g.pop("db_session", None)
    if session is not None:
        session.close()
