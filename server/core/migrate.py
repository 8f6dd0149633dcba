"""`hpcgrade db upgrade` / `downgrade`: Alembic driven from the service's configuration."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from server.core.config import ROOT


def alembic_config(database_url: str, course: str = "hpcgrade") -> Config:
    """`course`: the slug an installation of one course gives its course when it is upgraded
    to many (the COURSE setting; migration 0010)."""
    config = Config(attributes={"course": course})
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head", course: str = "hpcgrade") -> None:
    command.upgrade(alembic_config(database_url, course), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)
