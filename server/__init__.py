"""The hpcgrade service: the Flask portal and JSON API, and the `hpcgrade` command.

Importing the package loads nothing heavy: `hpcgrade grade` and the harness's catalogue need
neither Flask nor SQLAlchemy.
"""


def create_app(config: dict | None = None):
    """The portal's Flask app (see server.app); `gunicorn 'server:create_app()'` calls this."""
    from .app import create_app as build
    return build(config)
