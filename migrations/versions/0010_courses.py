"""courses and enrolments: an installation of one course becomes that course, named by COURSE
(`hpcgrade db upgrade` gives it), with every user enrolled in the role they had and admins
global

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import context, op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "courses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("title_en", sa.String(length=200), nullable=False),
        sa.Column("title_es", sa.String(length=200), nullable=False),
        sa.Column("edition", sa.String(length=64), server_default="", nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("exercises_dir", sa.String(length=1024), nullable=True),
        sa.Column("course_python", sa.String(length=1024), nullable=True),
        sa.Column("slurm", sa.JSON(), nullable=False),
        sa.Column("deadline_policy", sa.String(length=16), server_default="none", nullable=False),
        sa.Column("penalty_per_day", sa.Float(), server_default="0", nullable=False),
        sa.Column("job_name", sa.String(length=64), nullable=True),
        sa.Column("job_comment", sa.String(length=255), nullable=True),
        sa.Column("wckey", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_courses")),
        sa.UniqueConstraint("slug", name=op.f("uq_courses_slug")),
    )
    op.create_table(
        "enrolments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("course_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "role IN ('student', 'ta', 'instructor')", name=op.f("ck_enrolments_role")
        ),
        sa.ForeignKeyConstraint(
            ["course_id"],
            ["courses.id"],
            name=op.f("fk_enrolments_course_id_courses"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_enrolments_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_enrolments")),
        sa.UniqueConstraint("user_id", "course_id", name=op.f("uq_enrolments_user_id")),
    )
    with op.batch_alter_table("enrolments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_enrolments_course_id"), ["course_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_enrolments_user_id"), ["user_id"], unique=False)

    # the installation's one course: every exercise is its, every user enrolled as they were
    slug = context.config.attributes.get("course", "hpcgrade")
    connection = op.get_bind()
    now = sa.func.now() if connection.dialect.name == "postgresql" else sa.text("CURRENT_TIMESTAMP")
    users_exist = (
        connection.execute(sa.text("SELECT count(*) FROM users")).scalar()
        or connection.execute(sa.text("SELECT count(*) FROM exercises")).scalar()
    )
    if users_exist:
        connection.execute(
            sa.text(
                "INSERT INTO courses (slug, title_en, title_es, edition, slurm, deadline_policy, "
                "penalty_per_day, created_at) VALUES (:slug, :slug, :slug, '', '{}', 'none', 0, :now)"
            ),
            {"slug": slug, "now": connection.execute(sa.select(now)).scalar()},
        )
        course_id = connection.execute(sa.text("SELECT id FROM courses")).scalar()
        connection.execute(
            sa.text(
                "INSERT INTO enrolments (user_id, course_id, role, created_at) "
                "SELECT id, :course, role, created_at FROM users WHERE role IN ('student', 'instructor')"
            ),
            {"course": course_id},
        )
    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.add_column(sa.Column("course_id", sa.Integer(), nullable=True))
    if users_exist:
        connection.execute(
            sa.text("UPDATE exercises SET course_id = :course"), {"course": course_id}
        )
    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.alter_column("course_id", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_constraint(batch_op.f("uq_exercises_slug"), type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_exercises_course_id"), ["course_id", "slug"]
        )
        batch_op.create_index(batch_op.f("ix_exercises_course_id"), ["course_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_exercises_course_id_courses"), "courses", ["course_id"], ["id"]
        )

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("is_admin", sa.Boolean(), server_default="0", nullable=False))
    connection.execute(sa.text("UPDATE users SET is_admin = (role = 'admin')"))
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("ck_users_role"), type_="check")
        batch_op.drop_column("role")


def downgrade() -> None:
    # back to one course: the role a user has in the first course (an admin stays admin)
    connection = op.get_bind()
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("role", sa.String(length=16), server_default="student", nullable=False)
        )
    connection.execute(
        sa.text(
            "UPDATE users SET role = COALESCE((SELECT CASE e.role WHEN 'ta' THEN 'instructor' "
            "ELSE e.role END FROM enrolments e WHERE e.user_id = users.id "
            "ORDER BY e.course_id LIMIT 1), 'student')"
        )
    )
    connection.execute(sa.text("UPDATE users SET role = 'admin' WHERE is_admin"))
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("is_admin")
        batch_op.create_check_constraint("role", "role IN ('student', 'instructor', 'admin')")
    connection.execute(
        sa.text("DELETE FROM exercises WHERE course_id <> (SELECT min(id) FROM courses)")
    )
    with op.batch_alter_table("exercises", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_exercises_course_id_courses"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_exercises_course_id"))
        batch_op.drop_constraint(batch_op.f("uq_exercises_course_id"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_exercises_slug"), ["slug"])
        batch_op.drop_column("course_id")
    with op.batch_alter_table("enrolments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_enrolments_user_id"))
        batch_op.drop_index(batch_op.f("ix_enrolments_course_id"))
    op.drop_table("enrolments")
    op.drop_table("courses")
