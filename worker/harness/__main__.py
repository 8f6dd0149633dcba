"""`python -m worker.harness serve`: a warm grader reading jobs as JSON lines on stdin.

It writes one report per job, as a JSON line, on the stdout it was started with; anything else
that prints (torch warnings, an exercise's own prints) is sent to stderr, so the report channel
carries reports only. Runs with the standard library, torch and numpy: a course venv suffices.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from .jobs import Job


def serve(scratch_root: str | None) -> int:
    reports = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    try:
        from .grader import Harness
    except ImportError as exc:
        reports.write(json.dumps({"ready": False, "error": f"{sys.executable} cannot grade: {exc} "
                                  "(the course venv needs torch and numpy)"}) + "\n")
        return 1
    with Harness(scratch_root=scratch_root) as harness:
        reports.write(json.dumps({"ready": True}) + "\n")
        for line in sys.stdin:
            if not line.strip():
                continue
            job = None
            try:
                job = Job.from_dict(json.loads(line))
                report = harness.grade(job).to_dict()
            except Exception as exc:  # a grader failure is reported as such, never as a zero
                traceback.print_exc()
                report = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                          "exercise": job.exercise if job else None, "job_id": job.id if job else None}
            reports.write(json.dumps(report) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.harness")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="grade jobs read as JSON lines on stdin")
    serve_parser.add_argument("--scratch", help="where student scratch directories go")
    args = parser.parse_args()
    return serve(args.scratch)


if __name__ == "__main__":
    sys.exit(main())
