"""`%hpcgrade login`, `%hpcgrade check [COURSE/]SLUG`, `%hpcgrade submit [COURSE/]SLUG [NOTEBOOK]`,
`%hpcgrade my-courses` and `%hpcgrade course [COURSE]` in Jupyter.

`login` asks for the username and password and keeps a token, as `hpcgrade login` does, and
lists the user's courses, as `my-courses` does: an exercise in several of them is named with its
course, COURSE/SLUG or --course COURSE, or the notebook names its course once with `course
COURSE` (HPCGRADE_CLIENT_COURSE, where set, is the course before it does). `check`
runs the exercise's visible checks on the cells this kernel has run, in order, as the grader
runs a notebook's cells: what the notebook defines now, without saving it. `submit` sends the
kernel's own notebook file, as last saved, to the service with that token, and shows the result
once graded. Reports render as HTML in a notebook (the result page's words and marks) and as text
in a terminal's IPython.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import os
import shlex
import tempfile
from pathlib import Path

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from hpcgrade.client_file import default_server
from hpcgrade.service import Service, ServiceError, course_and_exercise, listed_courses, log_in
from hpcgrade.summary import summary, summary_html, translator
from hpcgrade.visible import run_visible_checks
from worker.harness.runner import HarnessFailed

NO_INPUT = (
    "this kernel cannot ask for a username and password (it runs with no input: "
    "papermill, nbclient…): run `hpcgrade login --server URL` once in a terminal, or set "
    "HPCGRADE_SERVER and HPCGRADE_TOKEN (a token from the portal's Account → API tokens)"
)


class _Parser(argparse.ArgumentParser):
    """Says what is wrong by raising it: argparse's own error() prints the usage to stderr and
    exits with status 2, which IPython showed as "UsageError: 2" between two usages."""

    def error(self, message: str):
        raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%hpcgrade", exit_on_error=False, add_help=False)
    parser.add_argument("action", choices=("login", "check", "submit", "my-courses", "course"))
    parser.add_argument("exercise", nargs="?", help="EXERCISE, or COURSE/EXERCISE; course: COURSE")
    parser.add_argument(
        "notebook", nargs="?", help="submit: the notebook's file, when the kernel cannot tell"
    )
    parser.add_argument("--course", help="the exercise's course, where it is in several of yours")
    parser.add_argument("--lang", choices=("en", "es"), default="en")
    parser.add_argument("--timeout", type=int, default=600, help="submit: seconds to wait")
    parser.add_argument("--server", help="login: the portal's URL")
    parser.add_argument("--username", help="login: asked for when not given")
    return parser


USAGE = """usage:
  %hpcgrade login [--server URL] [--username NAME]
  %hpcgrade check [COURSE/]EXERCISE [--course COURSE] [--lang es]
  %hpcgrade submit [COURSE/]EXERCISE [NOTEBOOK.ipynb] [--course COURSE] [--lang es]
                   [--timeout SECONDS]
  %hpcgrade my-courses
  %hpcgrade course [COURSE]        the course of this notebook's check and submit"""


@magics_class
class HpcgradeMagics(Magics):
    def __init__(self, shell=None):
        super().__init__(shell)
        # the course of the notebook's exercises, once it names one (`%hpcgrade course`)
        self.course = os.environ.get("HPCGRADE_CLIENT_COURSE") or None

    @line_magic
    def hpcgrade(self, line: str) -> None:
        if not line.strip():
            print(USAGE)
            return
        try:
            args = _parser().parse_intermixed_args(shlex.split(line))
        except (argparse.ArgumentError, ValueError) as exc:
            raise UsageError(f"{exc}\n{USAGE}") from None
        if args.action in ("check", "submit") and not args.exercise:
            raise UsageError(f"which exercise?\n{USAGE}")
        try:
            if args.action == "login":
                self.login(args.server, args.username)
            elif args.action == "my-courses":
                print(listed_courses(Service().courses(), args.lang))
            elif args.action == "course":
                self.name_course(args.exercise)
            else:
                course, exercise = course_and_exercise(args.exercise, args.course, self.course)
                if args.action == "check":
                    self.check(exercise, course, args.lang)
                else:
                    self.submit(exercise, course, args.notebook, args.lang, args.timeout)
        except (ServiceError, ValueError, HarnessFailed) as exc:
            raise UsageError(str(exc)) from None

    def name_course(self, course: str | None) -> None:
        """The notebook's course set to `course`, one of the user's, or said when none is given."""
        if course is None:
            print(
                f"this notebook's course: {self.course}"
                if self.course
                else "this notebook names no course: %hpcgrade course COURSE"
            )
            return
        courses = Service().courses()
        if course not in {c["slug"] for c in courses}:
            raise ValueError(f"{course} is not one of your courses:\n{listed_courses(courses)}")
        self.course = course
        print(f"this notebook's check and submit are for course {course}")

    def login(self, server: str | None, username: str | None) -> None:
        server = server or default_server()
        if not server:
            raise ValueError("which server? %hpcgrade login --server https://…")
        try:
            username = username or input("username: ")
            password = getpass.getpass("password: ")
        except (StdinNotImplementedError, EOFError, OSError):
            raise ValueError(NO_INPUT) from None
        answer = log_in(server, username, password)
        print(
            f"logged in to {server} as {answer['username']} (valid until "
            f"{answer.get('expires_at', '?')})"
        )
        print(f"your courses:\n{listed_courses(Service(server, answer['token']).courses())}")

    def check(self, exercise: str, course: str | None, lang: str) -> None:
        # the cells as a notebook, so that magics are neutralised (this extension's lines
        # without a note) and errors are told per cell: cell N is In [N] ([0] is IPython's
        # empty entry)
        cells = [
            {
                "cell_type": "code",
                "source": code,
                "metadata": {},
                "outputs": [],
                "execution_count": None,
            }
            for code in self.shell.history_manager.input_hist_raw[1:]
        ]
        try:  # what `submit` would send: its cells that do not compile are said
            saved = self.notebook_file()
        except ValueError:
            saved = None
        with tempfile.TemporaryDirectory(prefix="hpcgrade-notebook-") as folder:
            notebook = Path(folder) / "kernel.ipynb"
            notebook.write_text(
                json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
            )
            report = run_visible_checks(exercise, notebook, lang, course, submitted=saved)
        self.show(saved.name if saved else translator(lang).gettext("this notebook"), report, lang)

    @staticmethod
    def show(name: str, report: dict, lang: str) -> None:
        """The report as HTML in a notebook, as text where IPython shows text alone."""
        display(
            {
                "text/plain": summary(name, report, lang),
                "text/html": summary_html(name, report, lang),
            },
            raw=True,
        )

    def submit(
        self, exercise: str, course: str | None, given: str | None, lang: str, timeout: int
    ) -> None:
        path = Path(given) if given else self.notebook_file()
        if not path.is_file():
            raise ValueError(f"{path}: no such file")
        service = Service()
        saved = dt.datetime.fromtimestamp(path.stat().st_mtime).strftime("%H:%M:%S")
        created = service.submit(exercise, path.name, path.read_bytes(), lang, course)
        print(
            f"submitted {path.name} for {created['course']}/{exercise} as saved at {saved} "
            f"(unsaved changes are not sent): {service.page(created)}"
        )
        shown = None

        def progress(status: dict, _seconds: float) -> None:
            nonlocal shown
            if status["status"] != shown:
                print(status["status"] + "…", flush=True)
                shown = status["status"]

        status = service.wait_for_grade(created, lang, timeout, progress)
        if status is None:
            print(
                f"no grade after {timeout} s; the submission stays queued: {service.page(created)}"
            )
            return
        self.show(path.name, status, lang)

    def notebook_file(self) -> Path:
        """The notebook this kernel runs, as Jupyter Server (JPY_SESSION_NAME), ipykernel
        (__session__) or VS Code (__vsc_ipynb_file__) tell it."""
        namespace = self.shell.user_ns
        for told in (
            os.environ.get("JPY_SESSION_NAME"),
            namespace.get("__session__"),
            namespace.get("__vsc_ipynb_file__"),
        ):
            if isinstance(told, str) and told.endswith(".ipynb"):
                for candidate in (Path(told), Path(told).name):  # absolute, or the server's
                    if Path(candidate).is_file():  # path; the kernel runs in
                        return Path(candidate)  # the notebook's folder
        raise ValueError(
            "cannot tell which notebook this kernel runs: give its file, "
            "%hpcgrade submit EXERCISE my-notebook.ipynb"
        )
