"""saved_comments: comments the staff write once and give again when they adjust a score by hand,
for one exercise or for a whole course

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "saved_comments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("course_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("saved_by", sa.Integer(), nullable=True),
        sa.Column("saved_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["course_id"],
            ["courses.id"],
            name=op.f("fk_saved_comments_course_id_courses"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_saved_comments_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["saved_by"],
            ["users.id"],
            name=op.f("fk_saved_comments_saved_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_comments")),
    )
    with op.batch_alter_table("saved_comments", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_saved_comments_course_id"), ["course_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("saved_comments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_saved_comments_course_id"))
    op.drop_table("saved_comments")
