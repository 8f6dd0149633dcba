"""accommodations: one student's extra days on every deadline and factor on every limit of
attempts, in one course

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accommodations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("course_id", sa.Integer(), nullable=False),
        sa.Column("extra_days", sa.Integer(), server_default="0", nullable=False),
        sa.Column("attempts_factor", sa.Float(), server_default="1", nullable=False),
        sa.Column("comment", sa.Text(), server_default="", nullable=False),
        sa.Column("granted_by", sa.Integer(), nullable=True),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["course_id"],
            ["courses.id"],
            name=op.f("fk_accommodations_course_id_courses"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["granted_by"],
            ["users.id"],
            name=op.f("fk_accommodations_granted_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_accommodations_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_accommodations")),
        sa.UniqueConstraint("user_id", "course_id", name=op.f("uq_accommodations_user_id")),
    )
    with op.batch_alter_table("accommodations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_accommodations_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("accommodations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_accommodations_user_id"))
    op.drop_table("accommodations")
