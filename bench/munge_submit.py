"""What submitting from a cluster node with MUNGE costs against a token: `hpcgrade submit
--no-wait` as a student runs it (a new process each time), and the submission's request alone
and a status poll in process, each with a token and with a MUNGE credential made for it
(`munge -s`, decoded by the portal with `unmunge`, the credential remembered against replay).

The portal runs in this process (werkzeug's threaded server) on PostgreSQL; the credentials are
root's (this bench's account "root" is a directory one, MUNGE_MIN_UID 0). Interleaved rounds;
medians. Needs PostgreSQL and munged (`eval "$(scripts/services)"; scripts/slurm`):

    .venv/bin/python bench/munge_submit.py [--rounds 5] [--each 10]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import sqlalchemy as sa  # noqa: E402
from helpers import REFERENCE_Q, new_course, postgres_database  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

from hpcgrade.service import Service  # noqa: E402
from server.core import migrate  # noqa: E402
from server.core.catalogue import load_catalogue  # noqa: E402
from server.core.exercises import sync_exercises  # noqa: E402
from server.core.models import Exercise  # noqa: E402
from server.core.users import add_user  # noqa: E402
from server.web.app import create_app  # noqa: E402


def command_seconds(env: dict, work: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [str(ROOT / ".venv" / "bin" / "hpcgrade"), "submit", "autograd-q", str(work), "--no-wait"],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return time.perf_counter() - started


def request_seconds(service: Service) -> tuple[float, float]:
    started = time.perf_counter()
    created = service.submit("autograd-q", "work.py", REFERENCE_Q.encode())
    submitted = time.perf_counter()
    service.get(created["url"])
    return submitted - started, time.perf_counter() - submitted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--each", type=int, default=10)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # each request's line, each "stays queued" (no broker here)
    with contextmanager(postgres_database)() as url, tempfile.TemporaryDirectory() as scratch:
        migrate.upgrade(url)
        app = create_app(
            {
                "DATABASE_URL": url,
                "SECRET_KEY": uuid.uuid4().hex,
                "BROKER_URL": "redis://127.0.0.1:1/0",
                "MUNGE_LOGIN": True,
                "MUNGE_MIN_UID": 0,
                "SUBMISSIONS_PER_WINDOW": 100000,
                "LOGIN_LIMITS_STORAGE": "memory://",
            }
        )
        with app.app_context(), app.extensions["hpcgrade.db"].sessions.begin() as session:
            sync_exercises(session, new_course(session, "bench"), load_catalogue())
            session.execute(sa.update(Exercise).values(max_attempts=None))  # as many as it takes
            add_user(
                session, "root", "Root", "r@uni.es", "student", "bench-password"
            ).auth_source = "ldap"
        token = (
            app.test_client()
            .post("/api/v1/tokens", json={"username": "root", "password": "bench-password"})
            .json["token"]
        )
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}"
        work = Path(scratch) / "work.py"
        work.write_text(REFERENCE_Q)
        quiet = {
            **os.environ,
            "HPCGRADE_SERVER": base,
            "HPCGRADE_CLIENT_CONFIG": str(Path(scratch) / "none.toml"),
        }
        ways = {
            "token": ({**quiet, "HPCGRADE_TOKEN": token}, Service(base, token)),
            "MUNGE": (quiet, Service(base)),
        }
        commands = {way: [] for way in ways}
        submits = {way: [] for way in ways}
        polls = {way: [] for way in ways}
        for env, service in ways.values():  # warm up
            command_seconds(env, work)
            request_seconds(service)
        for _ in range(args.rounds):
            for way, (env, service) in ways.items():
                for _ in range(args.each):
                    commands[way].append(command_seconds(env, work))
                    submit, poll = request_seconds(service)
                    submits[way].append(submit)
                    polls[way].append(poll)
        server.shutdown()
        app.extensions["hpcgrade.db"].dispose()
    print(f"{args.rounds} rounds of {args.each}, medians:")
    for name, figures in (
        ("`hpcgrade submit --no-wait` (a new process)", commands),
        ("the submission's request alone", submits),
        ("a status poll", polls),
    ):
        token_ms, munge_ms = (statistics.median(figures[way]) * 1000 for way in ways)
        print(
            f"  {name}: token {token_ms:.1f} ms, MUNGE {munge_ms:.1f} ms "
            f"(ratio {munge_ms / token_ms:.2f}, +{munge_ms - token_ms:.1f} ms)"
        )


if __name__ == "__main__":
    main()
