"""set_grades: a grade an instructor sets for a student on an exercise, apart from a submission's
adjusted score (which, from now on, competes with the student's other submissions)

Until now the score set by hand last on any of a student's submissions of an exercise was their
grade. Where that rule and the new one (the best score, each submission counted as adjusted)
give different grades, the score set last becomes the student's grade set by hand, with its
comment, author and moment: no grade shown today changes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import datetime as dt
from itertools import groupby

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SAME_SCORE = 1e-9
EARLIEST = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
submissions = sa.table(
    "submissions",
    sa.column("id", sa.Integer),
    sa.column("user_id", sa.Integer),
    sa.column("exercise_id", sa.Integer),
    sa.column("score", sa.Float),
    sa.column("override_score", sa.Float),
    sa.column("override_comment", sa.Text),
    sa.column("override_by", sa.Integer),
    sa.column("override_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    set_grades = op.create_table(
        "set_grades",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("set_by", sa.Integer(), nullable=True),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"],
            ["exercises.id"],
            name=op.f("fk_set_grades_exercise_id_exercises"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["set_by"], ["users.id"], name=op.f("fk_set_grades_set_by_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_set_grades_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_set_grades")),
        sa.UniqueConstraint("user_id", "exercise_id", name=op.f("uq_set_grades_user_id")),
    )
    with op.batch_alter_table("set_grades", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_set_grades_user_id"), ["user_id"], unique=False)
    rows = [grade for grade in map(_kept_grade, _overridden(op.get_bind())) if grade]
    if rows:
        op.bulk_insert(set_grades, rows)


def _overridden(bind):
    """Each (student, exercise) with a score set by hand: its submissions in order."""
    pairs = (
        sa.select(submissions.c.user_id, submissions.c.exercise_id)
        .where(submissions.c.override_score.is_not(None))
        .distinct()
        .subquery()
    )
    found = bind.execute(
        sa.select(submissions)
        .join(
            pairs,
            sa.and_(
                submissions.c.user_id == pairs.c.user_id,
                submissions.c.exercise_id == pairs.c.exercise_id,
            ),
        )
        .order_by(submissions.c.user_id, submissions.c.exercise_id, submissions.c.id)
    )
    for _key, group in groupby(found, key=lambda row: (row.user_id, row.exercise_id)):
        yield list(group)


def _kept_grade(group: list) -> dict | None:
    """The grade set by hand that keeps the grade the old rule gave, where the new one differs."""
    overridden = [row for row in group if row.override_score is not None]
    # the old rule: the score set last (the later submission on a tie)
    last = max(reversed(overridden), key=lambda row: _aware(row.override_at))
    counted = [row.override_score if row.override_score is not None else row.score for row in group]
    best = max((score for score in counted if score is not None), default=None)
    if best is not None and abs(best - last.override_score) <= SAME_SCORE:
        return None
    return {
        "user_id": last.user_id,
        "exercise_id": last.exercise_id,
        "score": last.override_score,
        "comment": last.override_comment or "",
        "set_by": last.override_by,
        "set_at": last.override_at or dt.datetime.now(dt.timezone.utc),
    }


def _aware(moment: dt.datetime | None) -> dt.datetime:
    """SQLite hands back naive datetimes (stored in UTC)."""
    if moment is None:
        return EARLIEST
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def downgrade() -> None:
    # a grade set by hand has no place in the old schema: it is dropped (the adjusted scores stay)
    with op.batch_alter_table("set_grades", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_set_grades_user_id"))

    op.drop_table("set_grades")
