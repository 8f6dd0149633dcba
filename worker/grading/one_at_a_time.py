"""A lock that lets one task of a kind run at a time across every worker host, taken without
waiting: a task that finds it held returns at once, the holder doing its work.

On PostgreSQL it is an advisory lock, held by a connection of its own: every worker host reaches
the database (the source of truth), and the server drops the lock with the connection if the
worker dies. SQLite serves one machine only (the demo), where a lock file in the spool, flock'ed,
is enough, and the kernel drops it with the process. Neither needs Redis (the demo's broker is a
folder) nor a lock on the shared filesystem, which NFS and Lustre do not all honour.
"""

from __future__ import annotations

import fcntl
import os
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import text

from server.core.db import Database


@contextmanager
def one_at_a_time(database: Database, spool: Path, name: str) -> Iterator[bool]:
    """Yields whether this caller holds the lock `name` (then it is released at the end)."""
    if database.engine.dialect.name == "postgresql":
        with _advisory_lock(database, name) as held:
            yield held
    else:
        with _file_lock(spool / f".{name}.lock") as held:
            yield held


@contextmanager
def _advisory_lock(database: Database, name: str) -> Iterator[bool]:
    key = zlib.crc32(f"hpcgrade {name}".encode())  # a fixed number per name
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        held = connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": key})
        try:
            yield held
        finally:
            if held:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})


@contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o660)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True  # closing the descriptor releases it
    finally:
        os.close(descriptor)
