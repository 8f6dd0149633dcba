"""users' given and family names kept apart, guessed for the accounts there are from their full
name (server/core/names.py's split_name, as it stood: copied, so that this step stays what it
was): "Ana García López" → "Ana" / "García López", "María José de la Fuente" → "María José" /
"de la Fuente", "García, Ana" → "Ana" / "García". An instructor corrects a wrong guess by
importing the roster again or with the directory's and the single sign-on's names.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

PARTICLES = {"da", "das", "de", "del", "der", "di", "do", "dos", "du", "la", "las", "le", "los"}
PARTICLES |= {"san", "santa", "van", "von", "y", "i"}


def split_name(full: str) -> tuple[str, str]:
    full = " ".join(full.split())
    if "," in full:
        family, _, given = full.partition(",")
        return given.strip(), family.strip()
    groups: list[list[str]] = []
    pending: list[str] = []
    for word in full.split(" ") if full else []:
        pending.append(word)
        if word.casefold() not in PARTICLES:
            groups.append(pending)
            pending = []
    if pending:
        groups.append(pending)
    given_count = {0: 0, 1: 1, 2: 1, 3: 1}.get(len(groups), 2)
    given = " ".join(" ".join(group) for group in groups[:given_count])
    return given, " ".join(" ".join(group) for group in groups[given_count:])


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(
            sa.Column("given_name", sa.String(length=200), server_default="", nullable=False)
        )
        batch.add_column(
            sa.Column("family_name", sa.String(length=200), server_default="", nullable=False)
        )
    users = sa.table(
        "users",
        sa.column("id", sa.Integer),
        sa.column("name", sa.String),
        sa.column("given_name", sa.String),
        sa.column("family_name", sa.String),
    )
    connection = op.get_bind()
    rows = connection.execute(sa.select(users.c.id, users.c.name)).all()
    for user_id, name in rows:
        given, family = split_name(name or "")
        connection.execute(
            users.update()
            .where(users.c.id == user_id)
            .values(given_name=given[:200], family_name=family[:200])
        )


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("family_name")
        batch.drop_column("given_name")
