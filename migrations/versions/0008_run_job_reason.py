"""grading_runs.job_reason: why the cluster keeps a run's job waiting (squeue's reason)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_reason", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.drop_column("job_reason")
