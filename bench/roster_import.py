"""Wall time of importing a course's roster, through the roster page (the import's POST, in
process) and through `hpcgrade users import`, on PostgreSQL.

Baseline, measured in the same run: what the import cost while each new account got a generated
password, one slow hash a row (werkzeug's scrypt, in a pool of threads as create_accounts ran
them), timed on a sample of rows and scaled to the roster's size.

Needs PostgreSQL (`eval "$(scripts/services)"`):

    .venv/bin/python bench/roster_import.py [--rows 2000] [--sample 100]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from click.testing import CliRunner  # noqa: E402
from helpers import logged_in, new_course, postgres_database  # noqa: E402
from werkzeug.security import generate_password_hash  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.users import add_user  # noqa: E402
from server.web.app import create_app  # noqa: E402
from worker.cli.main import main as cli  # noqa: E402

SECRET_KEY = uuid.uuid4().hex


def roster(prefix: str, rows: int) -> str:
    return "username,name,email,role\n" + "".join(
        f"{prefix}{n:05},Student {n},{prefix}{n}@uni.es,student\n" for n in range(rows)
    )


def old_hashing(rows: int, sample: int) -> float:
    """Seconds that `rows` generated passwords took to hash, as create_accounts hashed them."""
    started = time.perf_counter()
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        list(pool.map(generate_password_hash, [secrets.token_urlsafe(9) for _ in range(sample)]))
    return (time.perf_counter() - started) / sample * rows


def through_the_page(url: str, rows: int) -> float:
    app = create_app(
        {
            "DATABASE_URL": url,
            "SECRET_KEY": SECRET_KEY,
            "BROKER_URL": "redis://127.0.0.1:1/0",
            "LOGIN_LIMITS_STORAGE": "memory://",
        }
    )
    with app.app_context(), app.extensions["hpcgrade.db"].sessions.begin() as session:
        new_course(session, "bench")
        add_user(session, "root", "Rosa", "r@uni.es", "admin", "bench-password")
    client, token = logged_in(app, "root", "bench-password")
    started = time.perf_counter()
    reply = client.post(
        "/courses/bench/staff/roster/import",
        data={"csrf_token": token, "roster": roster("web", rows)},
    )
    elapsed = time.perf_counter() - started
    assert reply.status_code == 200 and f"{rows} accounts added" in reply.text, reply.status
    app.extensions["hpcgrade.db"].dispose()
    return elapsed


def through_the_cli(url: str, rows: int, folder: Path) -> float:
    path = folder / "roster.csv"
    path.write_text(roster("cli", rows))
    environment = {
        "HPCGRADE_DATABASE_URL": url,
        "HPCGRADE_SECRET_KEY": SECRET_KEY,
        "HPCGRADE_PUBLIC_URL": "https://grader.example",
    }
    with mock.patch.dict(os.environ, environment):
        started = time.perf_counter()
        done = CliRunner().invoke(cli, ["users", "import", str(path)])
        elapsed = time.perf_counter() - started
    assert done.exit_code == 0 and done.output.count("\n") == rows + 1, done.output[-2000:]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--sample", type=int, default=100)
    args = parser.parse_args()
    baseline = old_hashing(args.rows, args.sample)
    with contextmanager(postgres_database)() as url:
        migrate.upgrade(url)
        page = through_the_page(url, args.rows)
        command = through_the_cli(url, args.rows, Path(os.environ.get("TMPDIR", "/tmp")))
    print(f"a roster of {args.rows} new accounts, on PostgreSQL ({os.cpu_count()} cores):")
    print(
        f"  baseline, a generated password hashed a row ({args.sample} timed, scaled): "
        f"{baseline:.1f} s"
    )
    print(
        f"  through the roster page (the import's POST): {page:.2f} s  "
        f"({baseline / page:.0f}x faster than the baseline)"
    )
    print(
        f"  through hpcgrade users import: {command:.2f} s  "
        f"({baseline / command:.0f}x faster than the baseline)"
    )


if __name__ == "__main__":
    main()
