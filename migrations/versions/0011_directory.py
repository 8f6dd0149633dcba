"""users.auth_source (local, ldap or oidc) and subject, courses.directory_groups,
enrolments.from_directory: log-in through the centre's directory or OpenID provider, enrolment from its groups

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("auth_source", sa.String(length=8), server_default="local", nullable=False)
        )
        batch_op.create_check_constraint("auth_source", "auth_source IN ('local', 'ldap', 'oidc')")
        batch_op.add_column(sa.Column("subject", sa.String(length=255), nullable=True))
    with op.batch_alter_table("courses", schema=None) as batch_op:
        batch_op.add_column(sa.Column("directory_groups", sa.JSON(), nullable=True))
    op.execute("UPDATE courses SET directory_groups = '{}'")
    with op.batch_alter_table("courses", schema=None) as batch_op:
        batch_op.alter_column("directory_groups", existing_type=sa.JSON(), nullable=False)
    with op.batch_alter_table("enrolments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("from_directory", sa.Boolean(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("enrolments", schema=None) as batch_op:
        batch_op.drop_column("from_directory")
    with op.batch_alter_table("courses", schema=None) as batch_op:
        batch_op.drop_column("directory_groups")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("subject")
        batch_op.drop_constraint("auth_source", type_="check")
        batch_op.drop_column("auth_source")
