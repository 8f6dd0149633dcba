"""`hpcgrade courses …` and `hpcgrade exercise(s) … --course`: an admin's courses from the command
line, every value checked, a wrong one refused with its message and nothing stored."""

import json
import re
import shutil

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from helpers import queue_submission

from server.core.courses import find_course
from server.core.models import Course, Enrolment, Exercise, Submission, User
from server.core.users import add_user
from worker.cli.main import main

EXERCISES = 16  # the exercises/ folder's


@pytest.fixture
def hpcgrade(database, monkeypatch):
    """`hpcgrade ARGS…` on the test's database (course pytorch, student ana): its result."""
    for name in ("HPCGRADE_CONFIG", "HPCGRADE_EXERCISES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "HPCGRADE_DATABASE_URL", database.engine.url.render_as_string(hide_password=False)
    )
    return lambda *args: CliRunner().invoke(main, list(args))


def course_row(database, slug: str) -> Course | None:
    with database.sessions() as session:
        return session.scalar(sa.select(Course).where(Course.slug == slug))


def slugs(database) -> list[str]:
    with database.sessions() as session:
        return sorted(session.scalars(sa.select(Course.slug)))


def one_exercise(folder, *names: str):
    """An exercises folder holding copies of exercises/autograd-q under `names`."""
    for name in names:
        shutil.copytree("exercises/autograd-q", folder / name)
    return folder


def test_create_sets_every_value_and_syncs_the_exercises(hpcgrade, database, tmp_path):
    folder = one_exercise(tmp_path / "mpi", "autograd-q")
    made = hpcgrade(
        "courses",
        "create",
        "mpi-2026",
        "--title-en",
        "MPI",
        "--title-es",
        "MPI (es)",
        "--edition",
        "2026",
        "--timezone",
        "America/Bogota",
        "--exercises",
        str(folder),
        "--python",
        "/opt/mpi/bin/python",
        "--slurm",
        "account=mpi",
        "--slurm",
        "partition=cpu",
        "--slurm",
        "gpus=0",
        "--slurm",
        "extra=--constraint=zen4 --exclusive",
        "--late-policy",
        "penalty",
        "--penalty-per-day",
        "0.2",
        "--job-name",
        "mpi-grade",
        "--job-comment",
        "MPI course",
        "--wckey",
        "mpi26",
    )
    assert made.exit_code == 0, made.output
    assert made.output == "created course mpi-2026: 1 exercises in step; added: autograd-q\n"
    mpi = course_row(database, "mpi-2026")
    assert (
        mpi.title_en,
        mpi.title_es,
        mpi.edition,
        mpi.timezone,
        mpi.exercises_dir,
        mpi.course_python,
    ) == ("MPI", "MPI (es)", "2026", "America/Bogota", str(folder), "/opt/mpi/bin/python")
    assert mpi.slurm == {
        "account": "mpi",
        "partition": "cpu",
        "gpus": 0,
        "extra": ["--constraint=zen4", "--exclusive"],
    }
    assert (mpi.deadline_policy, mpi.penalty_per_day, mpi.job_name, mpi.job_comment, mpi.wckey) == (
        "penalty",
        0.2,
        "mpi-grade",
        "MPI course",
        "mpi26",
    )
    shown = hpcgrade("courses", "show", "mpi-2026").output
    assert (
        "slurm            account=mpi partition=cpu gpus=0 extra='--constraint=zen4 --exclusive'"
        in shown
        and f"exercises_dir    {folder}" in shown
    )
    defaults = hpcgrade("courses", "show", "pytorch").output
    assert (
        "job_name         hpcgrade-pytorch" in defaults and "wckey            pytorch" in defaults
    )
    assert "timezone         (the service default)" in defaults


@pytest.mark.parametrize(
    "args, problem",
    [
        (["create", "pytorch"], "course pytorch already exists"),
        (
            ["create", "Not_A_Slug"],
            "course “Not_A_Slug”: use lower-case letters, digits and single",
        ),
        (
            ["create", "new", "--timezone", "Mars/Olympus"],
            "timezone must be a time zone like Europe/Madrid, not 'Mars/Olympus'",
        ),
        (["create", "new", "--slurm", "nodes=4"], "slurm: unknown keys nodes; valid keys are"),
        (["create", "new", "--slurm", "gpus"], "slurm: 'gpus' is not KEY=VALUE"),
        (["create", "new", "--slurm", "memory=lots"], "slurm memory must be an amount of memory"),
        (
            ["create", "new", "--exercises", "/no/such/folder"],
            "exercises_dir: /no/such/folder is not a folder here",
        ),
        (["create", "new", "--late-policy", "sometimes"], "deadline_policy: one of none, penalty"),
        (["create", "new", "--penalty-per-day", "half"], "penalty_per_day: a fraction between 0"),
        (["create", "new", "--wckey", "two words"], "wckey must be a name of letters"),
        (["edit", "nope", "--edition", "2"], "no course nope; the courses are: pytorch"),
        (["show", "nope"], "no course nope; the courses are: pytorch"),
        (["archive", "nope"], "no course nope"),
        (["copy", "nope", "new", "--edition", "2"], "no course nope"),
        (["copy", "pytorch", "pytorch", "--edition", "2"], "course pytorch already exists"),
        (["edit", "pytorch", "--timezone", "Nowhere"], "timezone must be a time zone"),
    ],
)
def test_a_wrong_value_is_refused_and_nothing_stored(hpcgrade, database, args, problem):
    before = course_row(database, "pytorch")
    refused = hpcgrade("courses", *args)
    assert refused.exit_code == 1 and f"Error: {problem}" in refused.output, refused.output
    assert slugs(database) == ["pytorch"]
    after = course_row(database, "pytorch")
    assert (after.timezone, after.edition, after.archived_at) == (
        before.timezone,
        before.edition,
        before.archived_at,
    )


def test_a_broken_exercise_stores_no_course(hpcgrade, database, tmp_path):
    folder = one_exercise(tmp_path / "broken", "autograd-q", "second")
    (folder / "second" / "exercise.toml").write_text("not [ toml")
    refused = hpcgrade("courses", "create", "broken", "--exercises", str(folder))
    assert (
        refused.exit_code == 1 and "bad exercise" in refused.output and "second" in refused.output
    )
    assert slugs(database) == ["pytorch"]


def test_edit_changes_what_it_names_and_an_empty_value_is_the_services_default(hpcgrade, database):
    assert (
        hpcgrade(
            "courses",
            "edit",
            "pytorch",
            "--timezone",
            "Europe/Madrid",
            "--slurm",
            "partition=gpu",
            "--slurm",
            "gpus=2",
            "--job-name",
            "torch",
        ).exit_code
        == 0
    )
    edited = hpcgrade(
        "courses",
        "edit",
        "pytorch",
        "--timezone",
        "",
        "--slurm",
        "gpus=",
        "--slurm",
        "qos=long",
        "--job-name",
        "",
        "--late-policy",
        "refuse",
    )
    assert edited.exit_code == 0 and f"{EXERCISES} exercises in step" in edited.output
    pytorch = course_row(database, "pytorch")
    assert (pytorch.timezone, pytorch.job_name, pytorch.deadline_policy) == (None, None, "refuse")
    assert pytorch.slurm == {"partition": "gpu", "qos": "long"}
    assert pytorch.title_en == "Tensors and autograd"  # not named: not changed


def test_an_exercise_whose_deadline_names_no_policy_takes_the_courses(hpcgrade, database, tmp_path):
    folder = one_exercise(tmp_path / "mpi", "autograd-q")
    toml = folder / "autograd-q" / "exercise.toml"
    toml.write_text(
        "\n".join(line for line in toml.read_text().splitlines() if not line.startswith("policy ="))
    )
    assert hpcgrade("courses", "create", "mpi", "--exercises", str(folder)).exit_code == 0
    assert hpcgrade("courses", "edit", "mpi", "--late-policy", "refuse").exit_code == 0
    with database.sessions() as session:  # synced again: the course's new default
        assert session.scalars(
            sa.select(Exercise.deadline_policy).join(Course).where(Course.slug == "mpi")
        ).all() == ["refuse"]


def test_copy_keeps_settings_staff_and_exercises_but_no_students_or_submissions(hpcgrade, database):
    queue_submission(database, "print(1)")
    with database.sessions.begin() as session:
        pytorch = find_course(session, "pytorch")
        pytorch.slurm = {"account": "torch"}
        add_user(
            session, "ines", "Inés", "i@uni.es", "instructor", "pw-long-enough", course=pytorch
        )
        add_user(session, "teo", "Teo", "t@uni.es", "ta", "pw-long-enough", course=pytorch)
    assert hpcgrade("courses", "copy", "pytorch", "pytorch-2027").exit_code == 2  # no edition
    copied = hpcgrade(
        "courses", "copy", "pytorch", "pytorch-2027", "--edition", "2027", "--slurm", "qos=long"
    )
    assert copied.exit_code == 0, copied.output
    assert copied.output.startswith(
        f"copied course pytorch into pytorch-2027: 2 staff, {EXERCISES} exercises in step"
    )
    copy = course_row(database, "pytorch-2027")
    assert (copy.title_en, copy.edition, copy.slurm) == (
        "Tensors and autograd",
        "2027",
        {"account": "torch", "qos": "long"},
    )
    with database.sessions() as session:
        assert sorted(
            session.execute(
                sa.select(User.username, Enrolment.role)
                .join(Enrolment)
                .where(Enrolment.course_id == copy.id)
            )
        ) == [("ines", "instructor"), ("teo", "ta")]
        assert (
            session.scalar(
                sa.select(sa.func.count())
                .select_from(Exercise)
                .where(Exercise.course_id == copy.id)
            )
            == EXERCISES
        )
        assert (
            session.scalar(
                sa.select(sa.func.count())
                .select_from(Submission)
                .join(Exercise)
                .where(Exercise.course_id == copy.id)
            )
            == 0
        )
    listed = json.loads(hpcgrade("courses", "list", "--json").output)
    assert [(c["slug"], c["students"], c["staff"], c["exercises"]) for c in listed] == [
        ("pytorch", 1, 2, EXERCISES),
        ("pytorch-2027", 0, 2, EXERCISES),
    ]


def test_archive_makes_a_course_read_only_and_undo_opens_it(hpcgrade, database):
    assert hpcgrade("courses", "archive", "pytorch").output == "course pytorch archived\n"
    assert course_row(database, "pytorch").archived_at is not None
    listed = hpcgrade("courses", "list").output.splitlines()
    assert listed[1].startswith("pytorch ") and listed[1].endswith("(archived)")
    refused = hpcgrade("courses", "edit", "pytorch", "--edition", "x")
    assert refused.exit_code == 1 and "courses archive pytorch --undo" in refused.output
    assert hpcgrade("exercise", "sync", "--course", "pytorch").exit_code == 1
    assert "no open course" in hpcgrade("exercise", "sync").output
    assert hpcgrade("courses", "archive", "pytorch", "--undo").exit_code == 0
    assert course_row(database, "pytorch").archived_at is None
    assert hpcgrade("courses", "edit", "pytorch", "--edition", "x").exit_code == 0


def test_exercise_sync_says_which_course_each_change_is_in(hpcgrade, database, tmp_path):
    folder = one_exercise(tmp_path / "mpi", "autograd-q")
    assert hpcgrade("courses", "create", "mpi", "--exercises", str(folder)).exit_code == 0
    assert hpcgrade("courses", "create", "old", "--exercises", str(folder)).exit_code == 0
    assert hpcgrade("courses", "archive", "old").exit_code == 0
    one_exercise(folder, "second")
    synced = hpcgrade("exercise", "sync")
    assert synced.exit_code == 0, synced.output
    assert synced.output.splitlines() == [
        "mpi: 2 exercises in step; added: second",
        f"pytorch: {EXERCISES} exercises in step",
    ]
    shutil.rmtree(folder / "second")
    only = hpcgrade("exercise", "sync", "--course", "mpi")
    assert only.output == "mpi: 1 exercises in step; deactivated: second\n"
    with database.sessions() as session:  # the archived course was left alone
        old = find_course(session, "old")
        assert session.scalars(
            sa.select(Exercise.slug).where(Exercise.course_id == old.id)
        ).all() == ["autograd-q"]
    unknown = hpcgrade("exercise", "sync", "--course", "nope")
    assert unknown.exit_code == 1 and "no course nope" in unknown.output


def test_exercise_commands_work_in_a_courses_folder(hpcgrade, database, tmp_path):
    folder = one_exercise(tmp_path / "mpi", "autograd-q")
    assert hpcgrade("courses", "create", "mpi", "--exercises", str(folder)).exit_code == 0
    listed = hpcgrade("exercises", "--course", "mpi", "--json")
    assert [e["slug"] for e in json.loads(listed.output)] == ["autograd-q"]
    made = hpcgrade("exercise", "new", "halo-exchange", "--course", "mpi")
    assert made.exit_code == 0 and (folder / "halo-exchange" / "exercise.toml").is_file()
    assert "hpcgrade exercise check halo-exchange --course mpi" in made.output
    unknown = hpcgrade("exercise", "check", "tensors-create", "--course", "mpi")
    assert unknown.exit_code == 2 and "known: autograd-q, halo-exchange" in unknown.output
    assert "no course nope" in hpcgrade("exercises", "--course", "nope").output


def test_edit_lets_a_courses_teaching_assistants_give_accommodations(hpcgrade, database):
    assert course_row(database, "pytorch").tas_grant_accommodations is False
    done = hpcgrade("courses", "edit", "pytorch", "--ta-accommodations", "yes")
    assert done.exit_code == 0, done.output
    assert course_row(database, "pytorch").tas_grant_accommodations is True
    assert re.search(
        r"^tas_grant_accommodations +True$", hpcgrade("courses", "show", "pytorch").output, re.M
    )
    assert hpcgrade("courses", "edit", "pytorch", "--ta-accommodations", "maybe").exit_code == 2
    assert hpcgrade("courses", "edit", "pytorch", "--ta-accommodations", "no").exit_code == 0
    assert course_row(database, "pytorch").tas_grant_accommodations is False
