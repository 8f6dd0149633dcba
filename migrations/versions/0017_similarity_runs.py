"""similarity_runs: an exercise's counted submissions compared for code alike, with the most
alike pairs and the matching regions of each

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "similarity_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("requested_by", sa.Integer(), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("compared", sa.Integer(), nullable=True),
        sa.Column("pairs", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_similarity_runs_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["requested_by"],
            ["users.id"],
            name=op.f("fk_similarity_runs_requested_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_similarity_runs")),
    )
    with op.batch_alter_table("similarity_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_similarity_runs_exercise_id"), ["exercise_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("similarity_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_similarity_runs_exercise_id"))
    op.drop_table("similarity_runs")
