"""How the service is, for its operators: /metrics for Prometheus (server/core/metrics.py), and
/healthz for a load balancer or a check that restarts what is down.

/metrics is not public: it answers the addresses of METRICS_ALLOW (the client's own, behind
TRUSTED_PROXIES), and a request that carries METRICS_TOKEN as a bearer token from anywhere.
/healthz says, to anyone, whether the database and the broker answer, whether a worker's
heartbeat is fresh and whether the schedule runs (its reconcile, every 30 s), without a word of
why not (the service's log has that).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging

from flask import Blueprint, Response, current_app, request
from prometheus_client.exposition import choose_encoder
from sqlalchemy import func, select, text

from server.core.conditions import SCHEDULE_STALE_SECONDS
from server.core.config import app_settings
from server.core.metrics import registry
from server.core.models import ScheduleRun, WorkerHeartbeat, utcnow

log = logging.getLogger(__name__)
blueprint = Blueprint("health", __name__)
BROKER_SECONDS = 2.0  # a broker that does not answer a connection within this is down
REGISTRY = "hpcgrade.metrics"


@blueprint.get("/metrics")
def metrics() -> Response:
    if not _may_read_metrics():
        return Response(
            "403 Forbidden: /metrics answers the addresses of METRICS_ALLOW, or "
            "METRICS_TOKEN as a bearer token\n",
            403,
            mimetype="text/plain",
        )
    if REGISTRY not in current_app.extensions:
        current_app.extensions[REGISTRY] = registry(
            current_app.extensions["hpcgrade.db"], app_settings()
        )
    # the text format, or OpenMetrics where the scraper asks for it
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return Response(encode(current_app.extensions[REGISTRY]), content_type=content_type)


def _may_read_metrics() -> bool:
    settings = app_settings()
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if (
        settings.metrics_token
        and scheme.lower() == "bearer"
        and hmac.compare_digest(given.strip().encode(), settings.metrics_token.encode())
    ):
        return True
    try:
        client = ipaddress.ip_address(request.remote_addr or "")
    except ValueError:
        return False
    return any(
        client in ipaddress.ip_network(allowed, strict=False) for allowed in settings.metrics_allow
    )


@blueprint.get("/healthz")
def healthz() -> tuple[dict, int]:
    """200 when the database and the broker answer, a worker's heartbeat is fresh and the
    schedule runs, 503 with what is not otherwise."""
    found = {"database": _database(), "broker": _broker()}
    found["worker"] = _worker() if found["database"] == "ok" else "unknown"
    found["schedule"] = _schedule() if found["database"] == "ok" else "unknown"
    healthy = all(value == "ok" for value in found.values())
    return {"status": "ok" if healthy else "failing", **found}, 200 if healthy else 503


def _database() -> str:
    try:
        with current_app.extensions["hpcgrade.db"].reads() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:  # the driver's many ways of saying "away"
        log.warning("healthz: the database does not answer: %s", exc)
        return "unreachable"
    return "ok"


def _broker() -> str:
    try:
        with current_app.extensions["celery"].connection_for_write(
            connect_timeout=BROKER_SECONDS
        ) as connection:
            # one try: kombu sleeps 2 s before a retry, and a prober asks again itself
            connection.ensure_connection(max_retries=0, timeout=BROKER_SECONDS)
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("healthz: the broker does not answer: %s", exc)
        return "unreachable"
    return "ok"


def _schedule() -> str:
    """ok while beat's reconcile has run lately: a beat stopped or stuck sends nothing."""
    with current_app.extensions["hpcgrade.db"].reads() as session:
        ran_at = session.scalar(select(ScheduleRun.ran_at).where(ScheduleRun.task == "reconcile"))
    if ran_at is None:
        return "never run"
    return "ok" if (utcnow() - ran_at).total_seconds() <= SCHEDULE_STALE_SECONDS else "stale"


def _worker() -> str:
    """ok while some worker's heartbeat is fresh (worker/grading/heartbeat.py)."""
    with current_app.extensions["hpcgrade.db"].reads() as session:
        newest = session.scalar(select(func.max(WorkerHeartbeat.beat_at)))
    if newest is None:
        return "no heartbeat"
    age = (utcnow() - newest).total_seconds()
    return "ok" if age <= app_settings().worker_heartbeat_stale_seconds else "stale"
