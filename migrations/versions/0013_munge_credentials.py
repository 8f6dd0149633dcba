"""munge_credentials: the MUNGE credentials requests used, until they expire (a replay to
another portal, whose munged never saw it, is refused too)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "munge_credentials",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_munge_credentials")),
    )
    with op.batch_alter_table("munge_credentials", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_munge_credentials_expires_at"), ["expires_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("munge_credentials", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_munge_credentials_expires_at"))
    op.drop_table("munge_credentials")
