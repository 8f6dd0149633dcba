"""The database: one declarative base with a constraint naming convention, and its sessions.

Schema changes are Alembic migrations under `migrations/` (`hpcgrade db upgrade`), a deploy
step: nothing here creates tables.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, MetaData, TypeDecorator, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, sessionmaker
from sqlalchemy.pool import NullPool

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes on every database (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, _dialect) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime: give it a timezone")
        return value.astimezone(dt.timezone.utc) if value is not None else None

    def process_result_value(self, value: dt.datetime | None, _dialect) -> dt.datetime | None:
        if value is None:
            return None
        return (
            value.replace(tzinfo=dt.timezone.utc)
            if value.tzinfo is None
            else value.astimezone(dt.timezone.utc)
        )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dt.datetime: UTCDateTime}


def make_engine(url: str, pooled: bool = True) -> Engine:
    """`pooled`: connections kept for the next session; unpooled, each session opens its own
    (a thread of a process that forks, whose children must inherit no open connection)."""
    engine = (
        create_engine(url, pool_pre_ping=True) if pooled else create_engine(url, poolclass=NullPool)
    )
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_pragmas(connection, _record) -> None:
    # SQLite ignores foreign keys unless asked; WAL lets the portal read while a worker writes.
    # The driver's own transaction handling breaks SAVEPOINT, so transactions are begun by hand.
    connection.isolation_level = None
    cursor = connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def _sqlite_begin(connection) -> None:
    # IMMEDIATE: writers queue up front instead of failing when two read-then-write at once.
    # A reads session must not queue behind its own request's session (WAL lets it read).
    reads = connection.get_execution_options().get("hpcgrade_reads")
    connection.exec_driver_sql("BEGIN" if reads else "BEGIN IMMEDIATE")


def make_session_factory(engine: Engine) -> sessionmaker:
    return sessionmaker(bind=engine, expire_on_commit=False)


class Database:
    """An engine and its session factory; the app keeps one, so does each worker process."""

    def __init__(self, url: str, pooled: bool = True):
        self.engine = make_engine(url, pooled)
        self.sessions = make_session_factory(self.engine)
        # one-statement reads (status polls) need no transaction: on PostgreSQL they skip the
        # BEGIN and ROLLBACK round trips; on SQLite they take no write lock
        self.reads = make_session_factory(
            self.engine.execution_options(hpcgrade_reads=True)
            if self.engine.dialect.name == "sqlite"
            else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )

    def dispose(self) -> None:
        self.engine.dispose()
