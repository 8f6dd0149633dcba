"""conditions: faults of the grading's infrastructure while they last, for students' pages

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conditions",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_conditions")),
    )


def downgrade() -> None:
    op.drop_table("conditions")
