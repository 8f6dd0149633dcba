"""grading_runs.job_state and node: where an asynchronous executor runs a run

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_state", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("node", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.drop_column("node")
        batch_op.drop_column("job_state")
