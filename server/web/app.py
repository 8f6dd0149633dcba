"""The app factory: configuration, database, Celery, CSRF and blueprints, wired together."""

from __future__ import annotations

import datetime as dt

from flask import Flask, g
from werkzeug.middleware.proxy_fix import ProxyFix

from server.core.config import FLASK_KEYS, SETTINGS_KEY, ConfigError, load_settings
from server.core.db import Database
from server.core.queue import celery_init_app
from server.web.csrf import csrf
from server.web.markup import to_html as inline_markdown
from server.web.results import ResultCache
from server.web.submissions import shown_name

# requests up to this many times MAX_UPLOAD_KB are read (32 MB by default: deploy/nginx's
# client_max_body_size, which must match)
UPLOAD_CAP_FACTOR = 32


def create_app(config: dict | None = None) -> Flask:
    """Wire the portal: configuration, database, CSRF protection, blueprints. Nothing else runs.
    `config`: settings by name over those of the file and the environment, and Flask's TESTING."""
    settings = load_settings(config)
    if not settings.secret_key:
        raise ConfigError("set HPCGRADE_SECRET_KEY (or SECRET_KEY in the config file)")
    app = Flask(__name__)
    # MAX_UPLOAD_KB is enforced by the submission's view (check_file), which answers with the
    # exercise's page, the limit and the pasted code; a request far larger than it still
    # reaches that view (Werkzeug spools file parts to disk), and a pasted file, a form field,
    # may be as large (not Werkzeug's 500 kB). Above this cap, errors.py reads and discards the
    # body before answering 413, or a browser would show "connection reset" instead.
    request_limit = UPLOAD_CAP_FACTOR * settings.max_upload_kb << 10
    app.config.update(
        {key: value for key, value in (config or {}).items() if key in FLASK_KEYS},
        SECRET_KEY=settings.secret_key,
        SESSION_COOKIE_SECURE=settings.session_cookie_secure,
        SESSION_COOKIE_SAMESITE=settings.session_cookie_samesite,
        MAX_CONTENT_LENGTH=request_limit,
        MAX_FORM_MEMORY_SIZE=request_limit,
        PERMANENT_SESSION_LIFETIME=dt.timedelta(hours=settings.session_lifetime_hours),
    )
    app.extensions[SETTINGS_KEY] = settings
    if settings.trusted_proxies:  # the client's address and scheme, as the proxy saw them
        proxies = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)
    app.extensions["hpcgrade.db"] = Database(settings.database_url)
    app.extensions["hpcgrade.results"] = ResultCache()
    csrf.init_app(app)
    celery_init_app(app)

    from server.web import (
        accommodations,
        account,
        admin,
        allowances,
        api,
        auth,
        courses,
        errors,
        handgrading,
        headers,
        health,
        i18n,
        portal,
        regrade,
        roster,
        similarity,
        staff,
        throttle,
        visible_checks,
    )

    i18n.init_app(app)
    app.add_template_filter(inline_markdown, "inline_markdown")  # `code`, *em*, **strong** only
    app.add_template_filter(shown_name, "shown_name")  # "pasted code" for code pasted in the form
    throttle.init_app(app)
    errors.register(app)
    headers.register(app)
    # what every request needs, in this order (not the blueprints' order): who it is from, in
    # which language, which course and the user's role there (the staff pages' check reads it)
    for hook in (auth.load_user, portal.choose_language, courses.load_course):
        app.before_request(hook)
    app.register_blueprint(auth.blueprint)
    from server.web.oidc_login import blueprint as single_sign_on

    app.register_blueprint(single_sign_on)
    app.register_blueprint(account.blueprint)
    app.register_blueprint(portal.blueprint)
    app.register_blueprint(visible_checks.blueprint)
    app.register_blueprint(courses.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(staff.blueprint)
    app.register_blueprint(roster.blueprint)
    app.register_blueprint(allowances.blueprint)
    app.register_blueprint(accommodations.blueprint)
    app.register_blueprint(handgrading.blueprint)
    from server.web.attempts import blueprint as attempts  # a student's history of an exercise

    app.register_blueprint(attempts)
    app.register_blueprint(regrade.blueprint)
    app.register_blueprint(similarity.blueprint)
    app.register_blueprint(admin.blueprint)
    app.register_blueprint(health.blueprint)  # /metrics and /healthz, for the operators
    app.teardown_appcontext(_close_session)
    return app


def _close_session(_exc: BaseException | None) -> None:
    session = g.pop("db_session", None)
    if session is not None:
        session.close()
