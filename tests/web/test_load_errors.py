"""Why a file did not load, or lacks a function, is said once in its run's notes, not on each
check: it still counts among an exercise's diagnostics for instructors, still fails a mutant
check that expects it, and a loader the student's code broke is such a load error too."""

import shutil

import pytest
from helpers import REFERENCE_Q, grade_next, logged_in
from sqlalchemy import select

from server.core.catalogue import default_root, load_exercise_info
from server.core.models import Exercise
from server.core.users import add_user
from server.web.course import diagnostic_counts
from worker.cli.main import self_check

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only

MISNAMED = "import torch\n\n\ndef q_grad(a, b, v):\n    return a, b\n"
# defined, but not where the grader finds it (the portal refuses a file that defines none)
NESTED = "import torch\n\n\ndef build():\n    def q_grads(a, b, v):\n        return a, b\n"
# the loader asks `callable` which names are functions: a submission that replaces it makes the
# load request itself answer with an error, not the file's own code
BREAKS_THE_LOADER = REFERENCE_Q + "\nimport builtins\nbuiltins.callable = lambda obj: 1 / 0\n"


def test_a_misnamed_function_counts_among_the_exercises_diagnostics(course, executor, catalogue):
    database = course.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
    ana, token = logged_in(course, "ana")
    sent = ana.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": NESTED},
    )
    assert sent.status_code == 303
    assert grade_next(database, executor, catalogue)[1] == "graded"
    with database.sessions() as session:
        q = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        assert diagnostic_counts(session, q.course_id, q.id) == {q.id: [("missing-function", 1, 1)]}
    prof, _ = logged_in(course, "prof")
    assert "missing-function" in prof.get("/courses/pytorch/staff/").text
    link = "/courses/pytorch/staff/exercises/autograd-q/diagnostics/missing-function"
    assert (
        f'href="{link}"' in prof.get("/courses/pytorch/staff/exercises/autograd-q").text
    )  # its bar
    page = prof.get(link).text
    assert "Ana García" in page and "<code>q_grads</code> is not defined." in page
    assert "1 submission got this diagnostic" in page


def test_a_loader_broken_by_the_code_is_a_load_error(grade_unsealed):
    """The seal taken away: sealed, the loader never reads the changed builtin (it runs on the
    submission's thread and the change is refused before the reply: tests/harness/test_seal_watch.py)."""
    report = grade_unsealed("autograd-q", BREAKS_THE_LOADER)
    assert report["status"] == "graded" and report["score"] == 0
    (load_error,) = [n for n in report["notes"] if n["kind"] == "load-error"]
    assert load_error["code"] == "import-error"
    assert (
        load_error["message"]
        == "The submission could not be loaded: ZeroDivisionError: division by zero"
    )
    assert load_error["details"]["line"] == REFERENCE_Q.count("\n") + 3  # the student's lambda
    assert all(c["diagnostics"] == [] for c in report["checks"])


@pytest.mark.selfcheck
@pytest.mark.parametrize(
    "mutant, code", [(MISNAMED, "missing-function"), ("raise ImportError('no')\n", "import-error")]
)
def test_a_mutant_may_expect_a_load_error(harness, second_harness, tmp_path, mutant, code):
    folder = tmp_path / "autograd-q"
    shutil.copytree(
        default_root() / "autograd-q",
        folder,
        ignore=shutil.ignore_patterns("mutants", "__pycache__"),
    )
    (folder / "mutants").mkdir()
    (folder / "mutants" / "broken.py").write_text(mutant)
    toml = folder / "exercise.toml"
    toml.write_text(toml.read_text().split("[mutants")[0] + f'\n[mutants]\nbroken = "{code}"\n')
    assert (
        self_check(
            harness,
            load_exercise_info(folder),
            (0,),
            write_visible_mistakes=True,
            second=second_harness,
        )
        == []
    )
