"""users, exercises, submissions, grading runs, results

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "exercises",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("title_en", sa.String(length=200), nullable=False),
        sa.Column("title_es", sa.String(length=200), nullable=False),
        sa.Column("section", sa.String(length=64), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deadline_policy", sa.String(length=16), nullable=False),
        sa.Column("penalty_per_day", sa.Float(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercises")),
        sa.UniqueConstraint("slug", name=op.f("uq_exercises_slug")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "role IN ('student', 'instructor', 'admin')", name=op.f("ck_users_role")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_id"), ["user_id"], unique=False)

    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("code", sa.LargeBinary(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("late_days", sa.Integer(), nullable=False),
        sa.Column("penalty", sa.Float(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("max_score", sa.Float(), nullable=True),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["exercise_id"], ["exercises.id"], name=op.f("fk_submissions_exercise_id_exercises")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_submissions_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submissions")),
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_submissions_exercise_id"), ["exercise_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_submissions_sha256"), ["sha256"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_status"), ["status"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_submissions_submitted_at"), ["submitted_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_submissions_user_id"), ["user_id"], unique=False)

    op.create_table(
        "grading_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("executor", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("external_id", sa.String(length=64), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("environment", sa.JSON(), nullable=True),
        sa.Column("sandbox", sa.JSON(), nullable=True),
        sa.Column("timing", sa.JSON(), nullable=True),
        sa.Column("notes", sa.JSON(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_grading_runs_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grading_runs")),
        sa.UniqueConstraint("submission_id", "attempt", name=op.f("uq_grading_runs_submission_id")),
    )
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_grading_runs_submission_id"), ["submission_id"], unique=False
        )

    op.create_table(
        "check_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("points", sa.Float(), nullable=False),
        sa.Column("max_points", sa.Float(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["grading_runs.id"],
            name=op.f("fk_check_results_run_id_grading_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_check_results")),
    )
    with op.batch_alter_table("check_results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_check_results_run_id"), ["run_id"], unique=False)

    op.create_table(
        "diagnostics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("check_id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("hint", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("translations", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["check_id"],
            ["check_results.id"],
            name=op.f("fk_diagnostics_check_id_check_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_diagnostics")),
    )
    with op.batch_alter_table("diagnostics", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_diagnostics_check_id"), ["check_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_diagnostics_code"), ["code"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("diagnostics", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_diagnostics_code"))
        batch_op.drop_index(batch_op.f("ix_diagnostics_check_id"))

    op.drop_table("diagnostics")
    with op.batch_alter_table("check_results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_check_results_run_id"))

    op.drop_table("check_results")
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_grading_runs_submission_id"))

    op.drop_table("grading_runs")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_user_id"))
        batch_op.drop_index(batch_op.f("ix_submissions_submitted_at"))
        batch_op.drop_index(batch_op.f("ix_submissions_status"))
        batch_op.drop_index(batch_op.f("ix_submissions_sha256"))
        batch_op.drop_index(batch_op.f("ix_submissions_exercise_id"))

    op.drop_table("submissions")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_id"))

    op.drop_table("api_tokens")
    op.drop_table("users")
    op.drop_table("exercises")
