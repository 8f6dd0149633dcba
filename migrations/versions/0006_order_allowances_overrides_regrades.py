"""exercises.position (course order), allowances (per-student exceptions), score overrides,
regrades (previewed "grade all again") and each run's seed and score

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allowances",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("extra_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("comment", sa.Text(), server_default="", nullable=False),
        sa.Column("granted_by", sa.Integer(), nullable=True),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_allowances_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["granted_by"],
            ["users.id"],
            name=op.f("fk_allowances_granted_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_allowances_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allowances")),
        sa.UniqueConstraint("user_id", "exercise_id", name=op.f("uq_allowances_user_id")),
    )
    with op.batch_alter_table("allowances", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_allowances_user_id"), ["user_id"], unique=False)

    op.create_table(
        "regrades",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("started_by", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("discarded_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_regrades_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["started_by"],
            ["users.id"],
            name=op.f("fk_regrades_started_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_regrades")),
    )
    with op.batch_alter_table("regrades", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_regrades_exercise_id"), ["exercise_id"], unique=False)

    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.add_column(sa.Column("position", sa.Integer(), server_default="0", nullable=False))

    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seed", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("score", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("max_score", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("regrade_id", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_grading_runs_regrade_id"), ["regrade_id"], unique=False
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_grading_runs_regrade_id_regrades"),
            "regrades",
            ["regrade_id"],
            ["id"],
            ondelete="SET NULL",
        )

    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("override_score", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("override_comment", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("override_by", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("override_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_submissions_override_by_users"), "users", ["override_by"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_submissions_override_by_users"), type_="foreignkey")
        batch_op.drop_column("override_at")
        batch_op.drop_column("override_by")
        batch_op.drop_column("override_comment")
        batch_op.drop_column("override_score")

    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_grading_runs_regrade_id_regrades"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_grading_runs_regrade_id"))
        batch_op.drop_column("regrade_id")
        batch_op.drop_column("max_score")
        batch_op.drop_column("score")
        batch_op.drop_column("seed")

    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.drop_column("position")

    with op.batch_alter_table("regrades", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_regrades_exercise_id"))

    op.drop_table("regrades")
    with op.batch_alter_table("allowances", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_allowances_user_id"))

    op.drop_table("allowances")
