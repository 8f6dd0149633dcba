"""What reading a token on every request costs the status poll (`GET /api/v1/submissions/<id>`,
polled every second by each waiting student), in process on PostgreSQL.

Compared, interleaved in rounds: the token and its user read in each request (what the API does),
and no token read at all (a stub that knows the answer: the best that the former per-process
cache of a minute could do). Prints medians per request and their ratio.

Needs PostgreSQL (`eval "$(scripts/services)"`):

    .venv/bin/python bench/token_auth.py [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import REFERENCE_Q, new_course, postgres_database  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.catalogue import load_catalogue  # noqa: E402
from server.core.exercises import sync_exercises  # noqa: E402
from server.core.users import add_user  # noqa: E402
from server.web import api  # noqa: E402
from server.web.app import create_app  # noqa: E402


def per_request(client, url: str, headers: dict, requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        assert client.get(url, headers=headers).status_code == 200
    return (time.perf_counter() - started) / requests * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with contextmanager(postgres_database)() as url:
        migrate.upgrade(url)
        app = create_app(
            {
                "DATABASE_URL": url,
                "SECRET_KEY": uuid.uuid4().hex,
                "BROKER_URL": "redis://127.0.0.1:1/0",
                "LOGIN_LIMITS_STORAGE": "memory://",
            }
        )
        with app.app_context(), app.extensions["hpcgrade.db"].sessions.begin() as session:
            sync_exercises(session, new_course(session, "bench"), load_catalogue())
            add_user(session, "ana", "Ana", "a@uni.es", "student", "bench-password")
        client = app.test_client()
        token = client.post(
            "/api/v1/tokens", json={"username": "ana", "password": "bench-password"}
        ).json["token"]
        headers = {"Authorization": f"Bearer {token}"}
        url = client.post(
            "/api/v1/submissions",
            headers=headers,
            data={"exercise": "autograd-q", "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
        ).json["url"]
        read = api._bearer
        with app.test_request_context(), app.extensions["hpcgrade.db"].reads() as reads:
            known = read(reads, token)
        read_each_time, stubbed = [], []
        per_request(client, url, headers, 200)  # warm up
        for _ in range(args.rounds):
            read_each_time.append(per_request(client, url, headers, args.requests))
            api._bearer = lambda _reads, _token: known
            try:
                stubbed.append(per_request(client, url, headers, args.requests))
            finally:
                api._bearer = read
        app.extensions["hpcgrade.db"].dispose()
    a, b = statistics.median(read_each_time), statistics.median(stubbed)
    print(f"status poll of a queued submission, {args.rounds} rounds of {args.requests}:")
    print(f"  token and user read in each request: {a:.3f} ms per request")
    print(f"  no token read (best case of a cache): {b:.3f} ms per request")
    print(f"  ratio: {a / b:.2f}  (+{a - b:.3f} ms per request)")


if __name__ == "__main__":
    main()
