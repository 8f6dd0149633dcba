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
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=Base.metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # unpooled: the connection below turns SQLite's foreign keys off, and must end with it
    engine = make_engine(config.get_main_option("sqlalchemy.url"), pooled=False)
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # SQLite rebuilds a table it alters (batch mode): dropping the old one would break
            # every reference to it, so references are checked once, after the migrations. The
            # pragma only works outside a transaction, hence on the driver's connection.
            connection.connection.dbapi_connection.execute("PRAGMA foreign_keys=OFF")
        # batch mode lets SQLite, which cannot ALTER most things, follow the same migrations
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=True,
            render_item=render_item,
        )
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration broke references: {broken[:10]}")
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
