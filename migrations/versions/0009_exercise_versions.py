"""exercises.version and commit, grading_runs.exercise_version and exercise_commit: which files
of an exercise gave a grade

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("commit", sa.String(length=40), nullable=True))
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("exercise_version", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("exercise_commit", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.drop_column("exercise_commit")
        batch_op.drop_column("exercise_version")
    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.drop_column("commit")
        batch_op.drop_column("version")
