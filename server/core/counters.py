"""Event counts for the service's operators (/metrics, server/core/metrics.py): what happened
that no other table keeps, such as mail sent, grader errors by cause or sbatch's refusals.

A count is a row of the counters table, added to in the transaction of what it counts (a run's
grader error is counted once, with the run's settling), from any process on any host: the
portal's, a worker's, a dispatcher on another machine. Counts only grow, as Prometheus expects
of a counter, and survive restarts.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from server.core.models import Counter

# the upper bounds of a histogram's buckets, in seconds (Prometheus's `le`), for durations from
# a warm harness's start to a cold one on a loaded node
START_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 60.0)
INSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def labels_key(labels: dict[str, str]) -> str:
    """Labels as the row keeps them: `name=value` pairs by name, comma-separated."""
    for name, value in labels.items():
        if "," in str(value) or "=" in str(value):
            raise ValueError(f"a label's value holds no comma or equals sign: {name}={value!r}")
    return ",".join(f"{name}={labels[name]}" for name in sorted(labels))


def count(session: Session, name: str, amount: float = 1.0, **labels: str) -> None:
    """Add `amount` to the count `name` with these labels, in the session's transaction."""
    insert = INSERTS[session.get_bind().dialect.name](Counter)
    row = {"name": name, "labels": labels_key(labels), "value": amount}
    session.execute(
        insert.values(**row).on_conflict_do_update(
            index_elements=[Counter.name, Counter.labels],
            set_={"value": Counter.value + insert.excluded.value},
        )
    )


def observe(
    session: Session, name: str, value: float, buckets: tuple[float, ...], **labels: str
) -> None:
    """One observation of a histogram: its buckets that hold it, its count and its sum."""
    for bound in (*buckets, float("inf")):
        if value <= bound:
            count(session, f"{name}_bucket", **labels, le=_bound(bound))
    count(session, f"{name}_count", **labels)
    count(session, f"{name}_sum", value, **labels)


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def read(session: Session) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every count: name → labels (as sorted pairs) → value."""
    found: dict[str, dict] = {}
    for name, labels, value in session.execute(select(Counter.name, Counter.labels, Counter.value)):
        pairs = tuple(tuple(pair.split("=", 1)) for pair in labels.split(",") if pair)
        found.setdefault(name, {})[pairs] = value
    return found
