"""operations: workers' heartbeats, the schedule's last runs, the cluster's back-off, event
counters for the metrics, and grading run ids never given twice on SQLite

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_heartbeats",
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("round_trip", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("node", name=op.f("pk_worker_heartbeats")),
    )
    op.create_table(
        "schedule_runs",
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("task", name=op.f("pk_schedule_runs")),
    )
    op.create_table(
        "cluster_states",
        sa.Column("executor", sa.String(length=32), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("resting_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("executor", name=op.f("pk_cluster_states")),
    )
    op.create_table(
        "counters",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("labels", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", "labels", name=op.f("pk_counters")),
    )
    # SQLite gives a deleted row's id again unless the table says AUTOINCREMENT (a copy of the
    # table; other databases never reuse an id)
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table(
            "grading_runs", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ):
            pass


def downgrade() -> None:
    op.drop_table("counters")
    op.drop_table("cluster_states")
    op.drop_table("schedule_runs")
    op.drop_table("worker_heartbeats")
