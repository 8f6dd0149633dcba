"""Alembic environment: the URL comes from `hpcgrade db upgrade` (the service's configuration)."""
from alembic import context

from server.core import models  # noqa: F401  (registers the tables on Base.metadata)
from server.core.db import Base, UTCDateTime, make_engine

config = context.config


def render_item(kind: str, obj, _context):
    """Migrations name plain SQLAlchemy types, not the service's Python-side wrappers."""
    if kind == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=Base.metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        # batch mode lets SQLite, which cannot ALTER most things, follow the same migrations
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True,
                          render_item=render_item)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
