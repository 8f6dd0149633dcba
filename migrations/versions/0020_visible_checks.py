"""visible checks: a student's run of an exercise's visible checks from the portal, which uses
no attempt

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "visible_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("code", sa.LargeBinary(), nullable=False),
        sa.Column("lang", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("takes", sa.Integer(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("report", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_visible_checks_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_visible_checks_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_visible_checks")),
    )
    with op.batch_alter_table("visible_checks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_visible_checks_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("visible_checks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_visible_checks_user_id"))
    op.drop_table("visible_checks")
