"""check_results.titles in every language

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("check_results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("titles", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("check_results", schema=None) as batch_op:
        batch_op.drop_column("titles")
