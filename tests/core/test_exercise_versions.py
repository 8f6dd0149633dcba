"""Which files of an exercise gave a grade: their version, and their git commit in a checkout."""

import shutil
import subprocess

from helpers import the_course

from server.core.catalogue import default_root, load_exercise_info
from server.core.exercises import sync_exercises
from server.core.models import Exercise
from worker.harness.jobs import exercise_version


def git(folder, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_the_version_is_the_files_and_the_commit_the_checkouts_while_unchanged(tmp_path):
    folder = tmp_path / "exercises" / "autograd-q"
    shutil.copytree(
        default_root() / "autograd-q", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    plain = load_exercise_info(folder)
    assert plain.version == exercise_version(folder) and plain.commit is None  # no checkout
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "autograd-q")
    (tmp_path / "elsewhere.txt").write_text("a change outside the exercise")
    committed = load_exercise_info(folder)
    assert committed.version == plain.version and committed.commit == git(
        tmp_path, "rev-parse", "HEAD"
    )
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "checks.pyc").write_bytes(b"compiled")
    assert load_exercise_info(folder).version == plain.version  # a compiled file changes nothing
    with open(folder / "checks.py", "a") as f:
        f.write("\n# a tweak\n")
    changed = load_exercise_info(folder)
    assert changed.version != plain.version and changed.commit is None  # not that commit's files


def test_a_sync_stores_the_version_and_says_the_exercise_changed(db_session, tmp_path):
    folder = tmp_path / "autograd-q"
    shutil.copytree(
        default_root() / "autograd-q", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    assert sync_exercises(
        db_session, the_course(db_session), {"autograd-q": load_exercise_info(folder)}
    )["added"]
    (folder / "checks.py").write_text((folder / "checks.py").read_text() + "\n# a tweak\n")
    changed = load_exercise_info(folder)
    assert sync_exercises(db_session, the_course(db_session), {"autograd-q": changed})[
        "updated"
    ] == ["autograd-q"]
    row = db_session.query(Exercise).filter_by(slug="autograd-q").one()
    assert (row.version, row.commit) == (changed.version, None)


def test_a_warm_harness_grades_with_the_files_as_they_are_and_says_which(harness, tmp_path):
    folder = tmp_path / "autograd-q"
    shutil.copytree(
        default_root() / "autograd-q", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    reference = folder / "reference.py"
    first = harness.report_for(load_exercise_info(folder).job(reference, seed=1))
    assert (first.exercise_version, first.max_score) == (exercise_version(folder), 10)
    checks = folder / "checks.py"
    checks.write_text(
        checks.read_text().replace('@check("grad-a", points=3', '@check("grad-a", points=1')
    )
    again = harness.report_for(load_exercise_info(folder).job(reference, seed=1))
    assert (again.exercise_version, again.max_score) == (exercise_version(folder), 8)
    assert again.exercise_version != first.exercise_version
