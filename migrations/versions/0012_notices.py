"""users.language and users.notices, deadline_reminders, grading_runs.failure_noticed_at: mail
that tells people what changed, in their language, as each chose

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("language", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("notices", sa.JSON(), nullable=True))
    op.execute("UPDATE users SET notices = '{}'")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.alter_column("notices", existing_type=sa.JSON(), nullable=False)

    op.create_table(
        "deadline_reminders",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_deadline_reminders_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_deadline_reminders_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deadline_reminders")),
        sa.UniqueConstraint("user_id", "exercise_id", name=op.f("uq_deadline_reminders_user_id")),
    )
    with op.batch_alter_table("deadline_reminders", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_deadline_reminders_user_id"), ["user_id"], unique=False
        )

    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("failure_noticed_at", sa.DateTime(timezone=True), nullable=True)
        )
    # the failures from before the upgrade are old news: no instructor is mailed about them
    op.execute(
        "UPDATE grading_runs SET failure_noticed_at = CURRENT_TIMESTAMP "
        "WHERE status IN ('failed', 'lost')"
    )


def downgrade() -> None:
    with op.batch_alter_table("grading_runs", schema=None) as batch_op:
        batch_op.drop_column("failure_noticed_at")
    with op.batch_alter_table("deadline_reminders", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deadline_reminders_user_id"))
    op.drop_table("deadline_reminders")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("notices")
        batch_op.drop_column("language")
