"""/admin/courses: an admin's courses from the web (listed, created, edited, copied into a new
edition, archived and opened again), for admins only, every value checked, nothing half-stored."""

import io
import shutil

import pytest
import sqlalchemy as sa
from helpers import CSRF_TOKEN, REFERENCE_Q, logged_in, new_course

from server.core.catalogue import DEADLINE_POLICIES
from server.core.courses import enrol, find_course
from server.core.models import Course, Enrolment, Exercise, Submission, User
from server.core.users import add_user

EXERCISES = 16  # the exercises/ folder's


@pytest.fixture
def people(course):
    """The course with an admin (root), an instructor (ines) and a TA (teo) besides its two
    students, ana and bea."""
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        pytorch = find_course(session, "pytorch")
        add_user(session, "root", "Root", "root@uni.es", "admin", "long-password")
        add_user(session, "ines", "Inés", "i@uni.es", "instructor", "long-password", course=pytorch)
        add_user(session, "teo", "Teo", "t@uni.es", "ta", "long-password", course=pytorch)
        session.commit()
    return course


def stored(app, query):
    with app.extensions["hpcgrade.db"].sessions() as session:
        return query(session)


def course_row(app, slug: str) -> Course | None:
    return stored(app, lambda s: s.scalar(sa.select(Course).where(Course.slug == slug)))


def form(token: str, **values) -> dict:
    """The course form as a browser sends it: every field, empty where not given."""
    fields = (
        "slug",
        "title_en",
        "title_es",
        "edition",
        "timezone",
        "exercises_dir",
        "course_python",
        "job_name",
        "job_comment",
        "wckey",
        "slurm_partition",
        "slurm_account",
        "slurm_qos",
        "slurm_gpus",
        "slurm_cpus",
        "slurm_memory",
        "slurm_time",
        "slurm_extra",
    )
    return {
        "csrf_token": token,
        "deadline_policy": "none",
        "penalty_per_day": "0",
        **dict.fromkeys(fields, ""),
        **values,
    }


def test_only_admins_open_the_pages(people):
    anonymous = people.test_client().get("/admin/courses/")
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]
    for username in ("ana", "teo", "ines"):  # an instructor of a course is no admin
        client, token = logged_in(people, username)
        for path in (
            "/admin/courses/",
            "/admin/courses/new",
            "/admin/courses/pytorch/edit",
            "/admin/courses/pytorch/copy",
        ):
            assert client.get(path).status_code == 403, (username, path)
        assert client.post("/admin/courses/new", data=form(token, slug="mine")).status_code == 403
        assert (
            client.post("/admin/courses/pytorch/archive", data={"csrf_token": token}).status_code
            == 403
        )
    assert course_row(people, "mine") is None and course_row(people, "pytorch").archived_at is None


def test_the_list_shows_every_course_with_its_people_and_exercises(people):
    with people.app_context():
        session = people.extensions["hpcgrade.db"].sessions()
        old = new_course(session, "pytorch-2025", edition="2025")
        old.archived_at = old.created_at
        session.commit()
    admin, _token = logged_in(people, "root")
    page = admin.get("/admin/courses/").text
    row = page[page.index(">pytorch</a>") : page.index("</tr>", page.index(">pytorch</a>"))]
    cells = [cell.split("</td>")[0] for cell in row.split("<td>")[1:5]]
    assert cells == ["Tensors and autograd", "—", "2", "2"] and f"<td>{EXERCISES}</td>" in row
    archived = page[page.index(">pytorch-2025</a>") :]
    assert "archived" in archived.split("</tr>")[0] and "Open again" in archived.split("</tr>")[0]
    assert 'href="/admin/courses/pytorch-2025/edit"' not in page  # read-only: no edit
    assert page.index(">pytorch</a>") < page.index(">pytorch-2025</a>")  # the open ones first


def test_the_admin_finds_the_pages_from_the_courses_list(people):
    admin, _token = logged_in(people, "root")
    assert 'href="/admin/courses/"' in admin.get("/").text
    with people.app_context():
        session = people.extensions["hpcgrade.db"].sessions()
        enrol(
            session,
            session.scalar(sa.select(User).where(User.username == "ana")),
            new_course(session, "mpi"),
            "student",
        )
        session.commit()
    ana, _token = logged_in(people, "ana")
    home = ana.get("/").text
    assert "mpi" in home and "/admin/courses" not in home


def test_a_course_is_created_with_its_settings_and_exercises(people, tmp_path):
    admin, token = logged_in(people, "root")
    page = admin.get("/admin/courses/new").text
    assert 'name="slug"' in page
    assert all(f'<option value="{policy}"' in page for policy in DEADLINE_POLICIES)
    sent = admin.post(
        "/admin/courses/new",
        data=form(
            token,
            slug="mpi-2026",
            title_en="MPI",
            title_es="MPI en español",
            edition="2026",
            timezone="America/Bogota",
            slurm_account="mpi",
            slurm_gpus="0",
            slurm_memory="8G",
            slurm_extra="--constraint=a100 --exclusive",
            deadline_policy="penalty",
            penalty_per_day="0.25",
            job_name="mpi-grade",
            wckey="mpi26",
        ),
    )
    assert sent.status_code == 303 and sent.headers["Location"].endswith("/admin/courses/")
    assert f"{EXERCISES} exercises in step" in admin.get("/admin/courses/").text
    mpi = course_row(people, "mpi-2026")
    assert (mpi.title_en, mpi.title_es, mpi.edition, mpi.timezone) == (
        "MPI",
        "MPI en español",
        "2026",
        "America/Bogota",
    )
    assert mpi.slurm == {
        "account": "mpi",
        "gpus": 0,
        "memory": 8192,
        "extra": ["--constraint=a100", "--exclusive"],
    }
    assert (
        mpi.deadline_policy,
        mpi.penalty_per_day,
        mpi.job_name,
        mpi.job_comment,
        mpi.wckey,
        mpi.exercises_dir,
    ) == ("penalty", 0.25, "mpi-grade", None, "mpi26", None)
    assert (
        stored(
            people,
            lambda s: s.scalar(
                sa.select(sa.func.count()).select_from(Exercise).where(Exercise.course_id == mpi.id)
            ),
        )
        == EXERCISES
    )


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"slug": "pytorch"}, "course pytorch already exists"),
        ({"slug": "Bad Slug"}, "use lower-case letters, digits and single dashes"),
        ({"timezone": "Mars/Olympus"}, "timezone must be a time zone like Europe/Madrid"),
        ({"slurm_gpus": "two"}, "slurm gpus must be a whole number"),
        ({"exercises_dir": "/no/such/folder"}, "exercises_dir: /no/such/folder is not a folder"),
        ({"penalty_per_day": "2"}, "penalty_per_day: a fraction between 0 and 1"),
        ({"deadline_policy": "sometimes"}, "deadline_policy: one of none, penalty, refuse"),
        ({"title_en": ""}, "title_en: a title of 1 to 200 characters"),
        ({"job_name": "two words"}, "job_name must be a name of letters"),
    ],
)
def test_a_wrong_value_is_shown_in_the_form_and_nothing_stored(people, values, problem):
    admin, token = logged_in(people, "root")
    before = stored(people, lambda s: s.scalars(sa.select(Course.slug)).all())
    sent = admin.post(
        "/admin/courses/new",
        data=form(token, **{"slug": "new-course", "title_en": "New", **values}),
    )
    assert sent.status_code == 400 and "Not saved" in sent.text, sent.text
    assert problem in sent.text, sent.text[sent.text.find("flash") :][:300]
    assert 'value="New"' in sent.text or not values.get("title_en", "x")  # the form keeps it
    assert stored(people, lambda s: s.scalars(sa.select(Course.slug)).all()) == before


def test_a_course_whose_exercises_are_broken_is_not_half_stored(people, tmp_path):
    folder = tmp_path / "exercises"
    shutil.copytree("exercises/autograd-q", folder / "autograd-q")
    (folder / "broken").mkdir()
    (folder / "broken" / "exercise.toml").write_text("this is [ not toml")
    admin, token = logged_in(people, "root")
    sent = admin.post(
        "/admin/courses/new",
        data=form(token, slug="broken-course", title_en="B", exercises_dir=str(folder)),
    )
    assert sent.status_code == 400 and "broken" in sent.text
    assert course_row(people, "broken-course") is None
    assert (
        stored(
            people,
            lambda s: s.scalar(
                sa.select(sa.func.count())
                .select_from(Exercise)
                .where(Exercise.slug == "autograd-q")
            ),
        )
        == 1
    )


def test_a_course_is_edited_and_an_empty_value_is_the_services_default(people):
    admin, token = logged_in(people, "root")
    with people.app_context():
        session = people.extensions["hpcgrade.db"].sessions()
        find_course(session, "pytorch").timezone = "Europe/Madrid"
        find_course(session, "pytorch").slurm = {"partition": "gpu", "gpus": 2}
        find_course(session, "pytorch").directory_groups = {"student": ["ml-2026"]}
        session.commit()
    page = admin.get("/admin/courses/pytorch/edit").text
    assert "<h1>Edit course pytorch</h1>" in page
    assert 'name="timezone" value="Europe/Madrid"' in page
    assert 'name="slurm_gpus" value="2"' in page and 'name="slug"' not in page
    sent = admin.post(
        "/admin/courses/pytorch/edit",
        data=form(
            token,
            title_en="Tensors",
            title_es="Tensores",
            edition="2026",
            slurm_partition="gpu",
            slurm_qos="long",
            deadline_policy="refuse",
        ),
    )
    assert sent.status_code == 303
    pytorch = course_row(people, "pytorch")
    assert (pytorch.title_en, pytorch.edition, pytorch.timezone, pytorch.deadline_policy) == (
        "Tensors",
        "2026",
        None,
        "refuse",
    )
    assert pytorch.slurm == {"partition": "gpu", "qos": "long"}  # gpus: the service's again
    assert pytorch.directory_groups == {"student": ["ml-2026"]}  # not the form's: kept
    refused = admin.post(
        "/admin/courses/pytorch/edit",
        data=form(token, title_en="Tensors", slurm_nodes="4", timezone="Nowhere"),
    )
    assert refused.status_code == 400 and "Nowhere" in refused.text
    assert course_row(people, "pytorch").title_en == "Tensors"
    assert admin.get("/admin/courses/nope/edit").status_code == 404


def test_a_copy_keeps_the_settings_staff_and_exercises_not_students_or_submissions(people):
    ana, token = logged_in(people, "ana")
    assert (
        ana.post(
            "/courses/pytorch/exercises/autograd-q/submissions",
            data={"csrf_token": token, "code": REFERENCE_Q},
        ).status_code
        == 303
    )
    admin, token = logged_in(people, "root")
    with people.app_context():
        session = people.extensions["hpcgrade.db"].sessions()
        find_course(session, "pytorch").slurm = {"account": "torch"}
        session.commit()
    page = admin.get("/admin/courses/pytorch/copy").text
    assert "<h1>Copy course pytorch into a new edition</h1>" in page
    assert 'name="slurm_account" value="torch"' in page and 'name="slug" value=""' in page
    missing = admin.post(
        "/admin/courses/pytorch/copy",
        data=form(
            token, slug="pytorch-2027", title_en="Tensors and autograd", slurm_account="torch"
        ),
    )
    assert missing.status_code == 400 and "give the new edition" in missing.text
    sent = admin.post(
        "/admin/courses/pytorch/copy",
        data=form(
            token,
            slug="pytorch-2027",
            title_en="Tensors and autograd",
            edition="2027",
            slurm_account="torch",
        ),
    )
    assert sent.status_code == 303
    copy = course_row(people, "pytorch-2027")
    assert (copy.edition, copy.slurm, copy.title_en) == (
        "2027",
        {"account": "torch"},
        "Tensors and autograd",
    )
    roles = stored(
        people,
        lambda s: sorted(
            s.execute(
                sa.select(User.username, Enrolment.role)
                .join(Enrolment)
                .where(Enrolment.course_id == copy.id)
            )
        ),
    )
    assert roles == [("ines", "instructor"), ("teo", "ta")]
    assert (
        stored(
            people,
            lambda s: s.scalar(
                sa.select(sa.func.count())
                .select_from(Exercise)
                .where(Exercise.course_id == copy.id)
            ),
        )
        == EXERCISES
    )
    assert (
        stored(
            people,
            lambda s: s.scalar(
                sa.select(sa.func.count())
                .select_from(Submission)
                .join(Exercise)
                .where(Exercise.course_id == copy.id)
            ),
        )
        == 0
    )
    taken = admin.post(
        "/admin/courses/pytorch/copy",
        data=form(token, slug="pytorch-2027", title_en="T", edition="2028"),
    )
    assert taken.status_code == 400 and "course pytorch-2027 already exists" in taken.text


def test_an_archived_course_refuses_submissions_and_still_shows(people):
    admin, admin_token = logged_in(people, "root")
    ana, token = logged_in(people, "ana")
    assert (
        admin.post("/admin/courses/pytorch/archive", data={"csrf_token": admin_token}).status_code
        == 303
    )
    assert course_row(people, "pytorch").archived_at is not None
    refused = ana.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    assert refused.status_code == 403 and "archived" in refused.text
    assert (
        stored(people, lambda s: s.scalar(sa.select(sa.func.count()).select_from(Submission))) == 0
    )
    assert "Gradients of a non-scalar function" in ana.get("/courses/pytorch/").text
    assert ana.get("/courses/pytorch/exercises/autograd-q").status_code == 200
    teo, _token = logged_in(people, "teo")
    assert teo.get("/courses/pytorch/staff/").status_code == 200
    assert admin.get("/admin/courses/pytorch/edit").status_code == 403  # read-only
    assert admin.get("/admin/courses/pytorch/copy").status_code == 200  # a new edition of it

    assert (
        admin.post("/admin/courses/pytorch/unarchive", data={"csrf_token": admin_token}).status_code
        == 303
    )
    assert course_row(people, "pytorch").archived_at is None
    assert (
        ana.post(
            "/courses/pytorch/exercises/autograd-q/submissions",
            data={"csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "w.py")},
        ).status_code
        == 303
    )


def test_a_form_without_its_csrf_token_changes_nothing(people):
    admin, token = logged_in(people, "root")
    assert admin.post("/admin/courses/pytorch/archive").status_code == 400
    assert (
        admin.post(
            "/admin/courses/new",
            data={**form(token, slug="x", title_en="X"), "csrf_token": "forged"},
        ).status_code
        == 400
    )
    assert course_row(people, "pytorch").archived_at is None and course_row(people, "x") is None
    assert CSRF_TOKEN.search(admin.get("/admin/courses/").text)  # each form has its token
