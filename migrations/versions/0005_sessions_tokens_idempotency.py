"""users.session_version, api_tokens.label and expires_at, submissions.idempotency_key

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import datetime as dt

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# tokens made before tokens expired get the default lifetime, counted from the upgrade
EXISTING_TOKENS_LIFETIME = dt.timedelta(days=120)


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("session_version", sa.Integer(), server_default="0", nullable=False)
        )

    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("label", sa.String(length=100), server_default="", nullable=False)
        )
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    tokens = sa.table("api_tokens", sa.column("expires_at", sa.DateTime(timezone=True)))
    op.execute(
        tokens.update().values(
            expires_at=dt.datetime.now(dt.timezone.utc) + EXISTING_TOKENS_LIFETIME
        )
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.alter_column(
            "expires_at", existing_type=sa.DateTime(timezone=True), nullable=False
        )

    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idempotency_key", sa.String(length=128), nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f("uq_submissions_user_id"), ["user_id", "idempotency_key"]
        )


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_submissions_user_id"), type_="unique")
        batch_op.drop_column("idempotency_key")

    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
        batch_op.drop_column("label")

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("session_version")
