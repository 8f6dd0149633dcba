"""Small helpers shared by the tests."""
import json
import os
import socket
import uuid
from pathlib import Path


def codes(report: dict) -> set[str]:
    return {d["code"] for c in report["checks"] for d in c["diagnostics"]}


def notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []}
                                 for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


REFERENCE_Q = (Path(__file__).parents[1] / "exercises" / "autograd-q" / "reference.py").read_text()


POSTGRES = os.environ.get("HPCGRADE_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


def postgres_database():
    """A new, empty PostgreSQL database, dropped afterwards."""
    import sqlalchemy as sa
    name = f"hpcgrade_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
