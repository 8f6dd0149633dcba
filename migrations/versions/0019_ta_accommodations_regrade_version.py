"""whether a course's teaching assistants grant accommodations (its instructors' by default),
and the exercise's files a regrade's preview started with (a preview of files changed since is
stale)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("courses", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("tas_grant_accommodations", sa.Boolean(), server_default="0", nullable=False)
        )
    with op.batch_alter_table("regrades", schema=None) as batch_op:
        batch_op.add_column(sa.Column("exercise_version", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("regrades", schema=None) as batch_op:
        batch_op.drop_column("exercise_version")
    with op.batch_alter_table("courses", schema=None) as batch_op:
        batch_op.drop_column("tas_grant_accommodations")
