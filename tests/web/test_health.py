"""/metrics and /healthz (server/web/health.py, server/core/metrics.py): who may read the
metrics, and that each says what the service's state is, read from the database and the spool."""

import datetime as dt
import json

import pytest
from helpers import REFERENCE_Q, change_settings, grade_next, logged_in
from prometheus_client.parser import text_string_to_metric_families
from test_result_page import SIGN_FLIPPED, send

from server.core import runs
from server.core.models import ClusterState, ScheduleRun, WorkerHeartbeat, utcnow
from server.web.app import create_app
from worker.harness.report import HARNESS_START, Report

OUTSIDE = {"REMOTE_ADDR": "10.9.9.9"}


def samples(app, **request) -> dict[tuple, float]:
    """Each sample of /metrics: (name, labels as sorted pairs) → value."""
    answer = app.test_client().get("/metrics", **request)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_metrics_answer_the_allowed_addresses_and_the_token_alone(app):
    client = app.test_client()
    assert client.get("/metrics").status_code == 200  # this host, as METRICS_ALLOW has it
    refused = client.get("/metrics", environ_base=OUTSIDE)
    assert refused.status_code == 403 and "METRICS_ALLOW" in refused.text
    change_settings(app, METRICS_TOKEN="s3cret-scrape")
    assert (
        client.get(
            "/metrics", environ_base=OUTSIDE, headers={"Authorization": "Bearer s3cret-scrape"}
        ).status_code
        == 200
    )
    for wrong in ("Bearer s3cret", "Bearer s3cret-scrape-", "s3cret-scrape", "Basic x"):
        assert (
            client.get(
                "/metrics", environ_base=OUTSIDE, headers={"Authorization": wrong}
            ).status_code
            == 403
        ), wrong
    change_settings(app, METRICS_ALLOW=["10.9.0.0/16"])
    assert client.get("/metrics", environ_base=OUTSIDE).status_code == 200
    assert client.get("/metrics").status_code == 403  # this host no longer is


def test_behind_the_proxy_the_client_is_who_the_proxy_says(database_url, tmp_path):
    """nginx connects from 127.0.0.1: its address must not open /metrics to everyone."""
    app = create_app(
        {
            "DATABASE_URL": database_url,
            "SECRET_KEY": "x",
            "TRUSTED_PROXIES": 1,
            "LOGIN_LIMITS_STORAGE": "memory://",
            "SPOOL_DIR": str(tmp_path),
        }
    )
    client = app.test_client()
    assert client.get("/metrics", headers={"X-Forwarded-For": "10.9.9.9"}).status_code == 403
    assert client.get("/metrics", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 200


def test_the_metrics_say_the_queue_the_grades_and_the_errors(course, executor, catalogue, tmp_path):
    database = course.extensions["hpcgrade.db"]
    client, token = logged_in(course)
    send(client, token, REFERENCE_Q)
    assert grade_next(database, executor, catalogue)[1] == "graded"
    send(client, token, SIGN_FLIPPED)  # waits in the queue
    errored = int(send(client, token, SIGN_FLIPPED).headers["Location"].rsplit("/", 1)[1])
    with database.sessions.begin() as session:
        run = runs.claim(session, errored, "local", "w", dt.timedelta(minutes=5))
    before = samples(course)
    with database.sessions.begin() as session:  # a harness's error, its first report
        failed = Report.grader_error("the harness could not start", "autograd-q")
        runs.record(
            session,
            run.run_id,
            Report.from_dict(dict(failed.to_dict(), timing={HARNESS_START: 2.5})),
        )
    found = samples(course)
    assert found[("hpcgrade_submissions", (("course", "pytorch"), ("status", "graded")))] == 1
    assert found[("hpcgrade_queue_depth", (("course", "pytorch"),))] == 2
    assert 0 <= found[("hpcgrade_queue_oldest_seconds", (("course", "pytorch"),))] < 60
    assert found[("hpcgrade_runs", (("course", "pytorch"), ("status", "done")))] == 1
    assert found[("hpcgrade_submission_grade_seconds_count", ())] == 1
    assert found[("hpcgrade_submission_grade_seconds_bucket", (("le", "3600.0"),))] == 1
    assert found[("hpcgrade_grader_errors_total", (("cause", "harness"),))] == 1
    assert found[("hpcgrade_grader_errors_total", (("cause", "worker-lost"),))] == 0
    assert found[("hpcgrade_sbatch_refusals_total", (("kind", "transient"),))] == 0
    # the harness's start, with the one of the tests' own harness if it just started
    grew = {key: found[key] - before[key] for key in found if "harness_start" in key[0]}
    assert grew[("hpcgrade_harness_start_seconds_bucket", (("le", "3.0"),))] == 1
    assert grew[("hpcgrade_harness_start_seconds_bucket", (("le", "2.0"),))] == 0
    assert grew[("hpcgrade_harness_start_seconds_sum", ())] == 2.5


def test_the_metrics_say_the_cluster_the_workers_the_pilots_and_the_spool(course, tmp_path):
    spool = tmp_path / "spool"
    change_settings(course, SPOOL_DIR=str(spool))
    pilot = spool / "pilots" / "4711"
    pilot.mkdir(parents=True)
    (pilot / "heartbeat.json").write_text(
        json.dumps({"beat": utcnow().timestamp() - 3, "node": "gpu07", "graded": 12})
    )
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        session.add(
            ClusterState(
                executor="slurm",
                failures=3,
                since=utcnow(),
                resting_until=utcnow() + dt.timedelta(seconds=20),
            )
        )
        session.add(
            WorkerHeartbeat(
                node="dispatcher@svc",
                pid=1,
                started_at=utcnow(),
                beat_at=utcnow() - dt.timedelta(seconds=4),
                round_trip=0.003,
            )
        )
    found = samples(course)
    assert 10 < found[("hpcgrade_cluster_resting_seconds", (("executor", "slurm"),))] <= 20
    assert found[("hpcgrade_cluster_failures", (("executor", "slurm"),))] == 3
    node = (("node", "dispatcher@svc"),)
    assert 3 < found[("hpcgrade_worker_heartbeat_age_seconds", node)] < 60
    assert found[("hpcgrade_worker_heartbeat_round_trip_seconds", node)] == 0.003
    assert found[("hpcgrade_worker_heartbeat_stale_seconds", ())] == 30
    labels = (("node", "gpu07"), ("pilot", "4711"))
    assert 2 < found[("hpcgrade_pilot_heartbeat_age_seconds", labels)] < 60
    assert found[("hpcgrade_pilot_graded_total", labels)] == 12
    assert found[("hpcgrade_spool_free_bytes", ())] > 0
    assert found[("hpcgrade_spool_min_free_bytes", ())] == 512 * 2**20


@pytest.fixture
def healthy(database_url, tmp_path):
    """The portal with a broker that answers (a folder, as the demo's)."""
    for folder in ("messages", "control"):
        (tmp_path / "broker" / folder).mkdir(parents=True)
    folders = {
        "data_folder_in": str(tmp_path / "broker" / "messages"),
        "data_folder_out": str(tmp_path / "broker" / "messages"),
        "control_folder": str(tmp_path / "broker" / "control"),
    }
    return create_app(
        {
            "DATABASE_URL": database_url,
            "SECRET_KEY": "x",
            "BROKER_URL": "filesystem://localhost/",
            "BROKER_TRANSPORT_OPTIONS": folders,
            "LOGIN_LIMITS_STORAGE": "memory://",
            "SPOOL_DIR": str(tmp_path),
        }
    )


def beating(app, ago: float) -> None:
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.merge(
            WorkerHeartbeat(
                node="w@h",
                pid=1,
                started_at=utcnow(),
                round_trip=0.01,
                beat_at=utcnow() - dt.timedelta(seconds=ago),
            )
        )


def scheduled(app, ago: float) -> None:
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.merge(ScheduleRun(task="reconcile", ran_at=utcnow() - dt.timedelta(seconds=ago)))


def test_healthz_answers_the_database_the_broker_the_worker_and_the_schedule(healthy):
    client = healthy.test_client()
    assert client.get("/healthz").json == {
        "status": "failing",
        "database": "ok",
        "broker": "ok",
        "worker": "no heartbeat",
        "schedule": "never run",
    }
    beating(healthy, ago=2)
    scheduled(healthy, ago=20)
    answer = client.get("/healthz", environ_base=OUTSIDE)  # anyone may ask
    assert (answer.status_code, answer.json["status"]) == (200, "ok")
    beating(healthy, ago=31)  # three heartbeats of 10 s missed
    answer = client.get("/healthz")
    assert (answer.status_code, answer.json["worker"]) == (503, "stale")
    beating(healthy, ago=2)
    scheduled(healthy, ago=91)  # three reconciles of 30 s missed: beat is gone or stuck
    answer = client.get("/healthz")
    assert (answer.status_code, answer.json["schedule"]) == (503, "stale")
    assert samples(healthy)[("hpcgrade_schedule_age_seconds", (("task", "reconcile"),))] > 90


def test_healthz_says_a_broker_that_is_down_and_no_more(app, monkeypatch):
    """The tests' portal's broker is a closed port: said at once (kombu slept 2 s before
    trying it again)."""
    slept = []
    monkeypatch.setattr("kombu.utils.functional.sleep", slept.append)
    answer = app.test_client().get("/healthz")
    assert slept == []
    assert answer.status_code == 503 and answer.json["broker"] == "unreachable"
    assert "127.0.0.1" not in answer.text and "refused" not in answer.text.lower()
