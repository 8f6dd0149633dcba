"""The instructors' course page, gradebook and exports: staff land on the course; columns by
exercise in course order with their maximum points, totals and percentages; overrides count;
CSV (and its Excel variant) with a maximum-points row; search, sort and filter; every student's
latest submission as a zip."""

import csv
import io
import re
import zipfile

import pytest
from helpers import log_in, logged_in, the_course
from sqlalchemy import update

from server.core.catalogue import load_catalogue
from server.core.exercises import sync_exercises
from server.core.models import Exercise
from server.core.users import add_user


def cells(row: str) -> list[str]:
    return [
        " ".join(re.sub(r"<[^>]+>", " ", cell).split())
        for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
    ]


def body_rows(page: str) -> dict[str, list[str]]:
    """A table's rows by the username shown in their first cell."""
    rows = {}
    for row in re.findall(r"<tr><(?:th scope=\"row\"|td)>.*?</tr>", page, re.S):
        found = re.search(r'<small class="muted">([\w.-]+)</small>', row)
        if found:
            rows[found.group(1)] = cells(row)
    return rows


def course_row(page: str, slug: str) -> list[str]:
    """An exercise's row on the course page."""
    return cells(
        re.search(
            f'<tr>\\s*<th scope="row"><a href="/courses/pytorch/staff/exercises/{slug}">.*?</tr>',
            page,
            re.S,
        ).group(0)
    )


def usernames(page: str) -> list[str]:
    return list(body_rows(page))


def only(app, *slugs: str) -> None:
    """Retire every other exercise, for figures small enough to check by hand."""
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.execute(update(Exercise).where(Exercise.slug.not_in(slugs)).values(active=False))


def test_staff_land_on_the_course_and_students_on_their_exercises(course):
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        session.commit()
    prof = course.test_client()
    assert log_in(prof, "prof").headers["Location"] == "/"
    assert prof.get("/").headers["Location"] == "/courses/pytorch/staff/"
    asked = log_in(course.test_client(), "prof", path="/login?next=/courses/pytorch/submissions")
    assert asked.headers["Location"] == "/courses/pytorch/submissions"
    ana = course.test_client()
    assert log_in(ana, "ana").headers["Location"] == "/"
    assert ana.get("/").headers["Location"] == "/courses/pytorch/"


def test_gradebook_columns_in_course_order_with_points_totals_and_percentages(marked_course):
    app, _ = marked_course
    kept = (
        "tensors-reshape",
        "autograd-q",
        "autograd-no-track",
        "autograd-accumulation",
        "autograd-custom-function",
    )
    only(app, *kept, "metrics")
    with app.extensions["hpcgrade.db"].sessions.begin() as session:  # metrics goes last
        session.execute(update(Exercise).where(Exercise.slug == "metrics").values(position=999))
    expected = [slug for slug in load_catalogue() if slug in kept] + ["metrics"]  # course order
    client, _ = logged_in(app, "prof")
    page = client.get("/courses/pytorch/staff/grades?lang=es").text
    head = re.search(r"<thead>.*?</thead>", page, re.S).group(0)
    sorts = re.findall(
        r'<th[^>]*><a href="/courses/pytorch/staff/grades\?(?:sort=([\w:-]+))?', head
    )
    # the student column sorts by name, the default
    assert sorts == ["", *(f"ex:{slug}" for slug in expected), "total"]
    assert "Gradientes de una función no escalar" in head and "Exactitud" in head
    maximum = cells(re.search(r'<tr class="maximum">.*?</tr>', head, re.S).group(0))
    assert maximum == ["Puntos máximos", "12", "10", "10", "10", "10", "10", "62", "100 %"]
    rows = body_rows(page)
    column = 1 + expected.index("autograd-q")
    # percentages to one decimal, as in the CSV
    assert rows["ana"][column] == "10" and rows["ana"][-2:] == ["15", "24,2 %"]
    # the adjusted score counts, marked
    assert rows["bea"][column] == "6 ✎ (ajustada a mano)" and rows["bea"][-1] == "9,7 %"
    assert rows["carl"][column] == "—" and rows["carl"][-2:] == ["0", "0,0 %"]


def test_grades_csv_has_a_maximum_row_totals_and_an_excel_variant(marked_course):
    app, _ = marked_course
    only(app, "autograd-q", "metrics")
    client, _ = logged_in(app, "prof")
    plain = client.get("/courses/pytorch/staff/grades.csv")
    assert plain.mimetype == "text/csv"
    assert "pytorch-grades.csv" in plain.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(plain.text)))
    assert rows[:2] == [
        ["username", "name", "email", "metrics", "autograd-q", "total", "percent"],
        ["", "max_points", "", "10", "10", "20", "100"],
    ]
    assert rows[2:] == [
        ["ana", "Ana García", "a@uni.es", "5", "10", "15", "75.0"],
        ["bea", "Bea Martín", "b@uni.es", "", "6", "6", "30.0"],
        ["carl", "Carl Ruiz", "carl@example.org", "", "", "0", "0.0"],
    ]
    excel = client.get("/courses/pytorch/staff/grades-excel.csv")
    assert excel.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert "pytorch-grades-excel.csv" in excel.headers["Content-Disposition"]
    assert excel.data.startswith(b"\xef\xbb\xbf")  # the byte order mark: Excel then reads UTF-8
    assert excel.data.decode("utf-8-sig") == plain.data.decode("utf-8")


def test_grades_for_moodle_and_canvas_as_their_imports_read_them(marked_course):
    """No row of maximum points for Moodle, which would read it as a student without a
    username; Canvas's required columns and its own "Points Possible" row, the students named
    by their SIS Login ID."""
    app, _ = marked_course
    only(app, "autograd-q", "metrics")
    client, _ = logged_in(app, "prof")
    grades = client.get("/courses/pytorch/staff/grades").text
    assert 'href="/courses/pytorch/staff/grades-moodle.csv">CSV for Moodle' in grades
    assert 'href="/courses/pytorch/staff/grades-canvas.csv">CSV for Canvas' in grades
    moodle = client.get("/courses/pytorch/staff/grades-moodle.csv")
    assert "pytorch-moodle.csv" in moodle.headers["Content-Disposition"]
    assert list(csv.reader(io.StringIO(moodle.text))) == [
        ["username", "email", "metrics", "autograd-q"],
        ["ana", "a@uni.es", "5", "10"],
        ["bea", "b@uni.es", "", "6"],
        ["carl", "carl@example.org", "", ""],
    ]
    canvas = client.get("/courses/pytorch/staff/grades-canvas.csv")
    assert "pytorch-canvas.csv" in canvas.headers["Content-Disposition"]
    assert list(csv.reader(io.StringIO(canvas.text))) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "metrics", "autograd-q"],
        ["    Points Possible", "", "", "", "", "10", "10"],
        ["Ana García", "", "", "ana", "", "5", "10"],
        ["Bea Martín", "", "", "bea", "", "", "6"],
        ["Carl Ruiz", "", "", "carl", "", "", ""],
    ]
    student, _ = logged_in(app, "ana")
    assert student.get("/courses/pytorch/staff/grades-canvas.csv").status_code == 403


def test_search_sort_and_filter_the_gradebook(marked_course):
    app, _ = marked_course
    only(app, "autograd-q", "metrics")
    client, _ = logged_in(app, "prof")
    assert usernames(client.get("/courses/pytorch/staff/grades").text) == [
        "ana",
        "bea",
        "carl",
    ]  # by name
    assert usernames(client.get("/courses/pytorch/staff/grades?q=garcia").text) == [
        "ana"
    ]  # accents aside
    assert usernames(client.get("/courses/pytorch/staff/grades?q=EXAMPLE.org").text) == [
        "carl"
    ]  # the email
    assert usernames(client.get("/courses/pytorch/staff/grades?q=be").text) == [
        "bea"
    ]  # the username
    assert (
        "No student matches the search." in client.get("/courses/pytorch/staff/grades?q=zzz").text
    )
    by_total = client.get("/courses/pytorch/staff/grades?sort=total&order=desc").text
    assert usernames(by_total) == ["ana", "bea", "carl"]
    sorted_header = re.search(r'<th[^>]* aria-sort="descending"><a href="([^"]+)">Total', by_total)
    assert (
        sorted_header.group(1) == "/courses/pytorch/staff/grades?sort=total"
    )  # a second click: ascending
    # no score sorts last, whichever the order
    assert usernames(client.get("/courses/pytorch/staff/grades?sort=ex:autograd-q").text) == [
        "bea",
        "ana",
        "carl",
    ]
    assert usernames(
        client.get("/courses/pytorch/staff/grades?sort=ex:autograd-q&order=desc").text
    ) == ["ana", "bea", "carl"]
    missing = client.get("/courses/pytorch/staff/grades?filter=missing&q=a").text
    assert usernames(missing) == ["bea", "carl"] and "2 of 3 students" in missing
    assert 'value="missing" selected' in missing and 'value="a"' in missing
    assert usernames(client.get("/courses/pytorch/staff/grades?filter=below").text) == [
        "bea",
        "carl",
    ]


def test_what_the_query_string_gets_wrong_is_said_and_left_at_its_default(marked_course):
    app, _ = marked_course
    client, _ = logged_in(app, "prof")
    page = client.get("/courses/pytorch/staff/grades?sort=height&order=up&filter=tall")
    assert page.status_code == 200 and usernames(page.text) == ["ana", "bea", "carl"]
    assert "cannot be sorted by “height”" in page.text and "not “up”" in page.text
    assert "There is no filter “tall”" in page.text
    spanish = client.get("/courses/pytorch/staff/grades?sort=height&lang=es").text
    assert "no se puede ordenar por “height”" in spanish


def test_the_course_page_per_exercise(marked_course):
    app, _ = marked_course
    client, _ = logged_in(app, "prof")
    page = client.get("/courses/pytorch/staff/").text
    assert "3 students" in page
    catalogue = load_catalogue()
    titles = [
        catalogue[slug].title["en"]
        for slug in sorted(catalogue, key=lambda slug: (catalogue[slug].order, slug))
    ]
    assert sorted(titles, key=page.index) == titles  # in course order
    row = course_row(page, "autograd-q")
    # exercise, deadline, students, submissions, mean best (the override counts), full marks
    assert row[1:7] == ["31 Jan 2027, 22:59 UTC", "2 / 3", "3", "8 / 10", "1", "—"]
    assert row[7] == "grad-sign-flipped 2 students missing-function 1 student"
    # to its named mistake's section of the diagnostic's page
    assert (
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/missing-function#mistake-" in page
    )
    assert '/courses/pytorch/staff/exercises/autograd-q#charts"' in page
    assert course_row(page, "metrics")[6] == "1 waiting"
    spanish = client.get("/courses/pytorch/staff/?lang=es").text
    assert "3 estudiantes" in spanish and "1 estudiante<" in spanish and "1 en espera" in spanish


def test_search_sort_and_filter_an_exercises_students(marked_course):
    app, ids = marked_course
    client, _ = logged_in(app, "prof")
    page = client.get("/courses/pytorch/staff/exercises/autograd-q").text
    rows = body_rows(page)
    assert rows["ana"][1:3] == ["2", "10 / 10"] and "23 Nov 2026, 17:05" in rows["ana"][3]
    assert rows["bea"][2] == "6 / 10 ✎ (adjusted by hand)"
    assert rows["carl"][3] == "nothing submitted"
    assert "out of 10 points" in page
    assert usernames(
        client.get("/courses/pytorch/staff/exercises/autograd-q?sort=best&order=desc").text
    ) == ["ana", "bea", "carl"]
    assert usernames(
        client.get("/courses/pytorch/staff/exercises/autograd-q?filter=missing").text
    ) == ["carl"]
    below = client.get("/courses/pytorch/staff/exercises/autograd-q?filter=below&q=r").text
    assert usernames(below) == ["carl"] and "1 of 3 students" in below
    assert (
        'aria-sort="ascending"><a href="/courses/pytorch/staff/exercises/autograd-q?order=desc">Student'
        in page
    )


def test_the_latest_submission_of_each_student_as_a_zip(marked_course):
    app, _ = marked_course
    client, _ = logged_in(app, "prof")
    sent = client.get("/courses/pytorch/staff/exercises/autograd-q/submissions.zip")
    assert sent.is_streamed and sent.mimetype == "application/zip"
    assert "autograd-q-submissions.zip" in sent.headers["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(sent.data))
    assert archive.testzip() is None
    # the latest of each student's (ana's second), the instructor's own left out
    assert sorted(archive.namelist()) == ["ana.py", "bea.py"]
    assert archive.read("ana.py") == b"ana = 2\n"
    assert archive.getinfo("ana.py").date_time == (2026, 11, 23, 17, 5, 0)
    notebooks = zipfile.ZipFile(
        io.BytesIO(client.get("/courses/pytorch/staff/exercises/metrics/submissions.zip").data)
    )
    assert sorted(notebooks.namelist()) == ["ana.py", "bea.ipynb"]
    nothing = client.get("/courses/pytorch/staff/exercises/tensors-reshape/submissions.zip")
    assert nothing.status_code == 303
    assert "Nobody has submitted this exercise yet" in client.get(nothing.headers["Location"]).text
    assert client.get("/courses/pytorch/staff/exercises/nothing/submissions.zip").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/courses/pytorch/staff/grades-excel.csv",
        "/courses/pytorch/staff/grades?sort=total",
        "/courses/pytorch/staff/exercises/autograd-q/submissions.zip",
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped",
    ],
)
def test_students_cannot_get_in(marked_course, path):
    app, _ = marked_course
    student, _ = logged_in(app, "ana")
    assert student.get(path).status_code == 403


def test_an_exercise_whose_folder_broke_is_out_of_its_best_graded_maximum(
    marked_course, monkeypatch, tmp_path
):
    app, _ = marked_course
    only(app, "autograd-q")
    monkeypatch.setenv("HPCGRADE_EXERCISES", str(tmp_path))  # no exercise folder at all
    client, _ = logged_in(app, "prof")
    rows = list(csv.reader(io.StringIO(client.get("/courses/pytorch/staff/grades.csv").text)))
    assert rows[1] == ["", "max_points", "", "10", "10", "100"]


def test_an_exercise_named_like_a_column_sorts_by_its_own_scores(marked_course):
    """A slug such as "total" or "name" sorts by its exercise (?sort=ex:total), and ?sort=total
    still by the total."""
    app, _ = marked_course
    only(app, "autograd-q", "metrics")
    with app.extensions["hpcgrade.db"].sessions.begin() as session:  # metrics: ana 5, bea queued
        session.execute(update(Exercise).where(Exercise.slug == "metrics").values(slug="total"))
    client, _ = logged_in(app, "prof")
    page = client.get("/courses/pytorch/staff/grades").text
    assert 'href="/courses/pytorch/staff/grades?sort=ex:total"' in page
    assert 'href="/courses/pytorch/staff/grades?sort=total"' in page
    # by the total: ana 15, bea 6, carl 0; by the exercise: only ana has a score
    by_total = usernames(client.get("/courses/pytorch/staff/grades?sort=total&order=desc").text)
    assert by_total == ["ana", "bea", "carl"]
    assert usernames(client.get("/courses/pytorch/staff/grades?sort=total").text) == [
        "carl",
        "bea",
        "ana",
    ]
    assert (
        usernames(client.get("/courses/pytorch/staff/grades?sort=ex:total&order=desc").text)[0]
        == "ana"
    )
    assert "cannot be sorted" not in client.get("/courses/pytorch/staff/grades?sort=ex:total").text


def test_usernames_sort_alike_on_every_list(marked_course):
    """The gradebook, an exercise's students and the roster fold the case of usernames alike."""
    app, _ = marked_course
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        add_user(session, "Bob", "Bob", "bob@uni.es", "student", "long-password")
    client, _ = logged_in(app, "prof")
    expected = ["ana", "bea", "Bob", "carl"]
    assert usernames(client.get("/courses/pytorch/staff/grades?sort=username").text) == expected
    assert (
        usernames(client.get("/courses/pytorch/staff/exercises/autograd-q?sort=username").text)
        == expected
    )
    roster = client.get("/courses/pytorch/staff/roster/?sort=username&filter=student").text
    assert re.findall(r'<th scope="row"><a [^>]*>([\w.-]+)', roster) == expected


def test_the_excel_variant_in_spanish_has_semicolons_and_decimal_commas(marked_course):
    """A Spanish Excel splits a CSV's lines at `;` and reads 7.5 as a date: the reader in
    Spanish gets `;` and decimal commas, with the BOM; in English, the plain table's commas."""
    app, _ = marked_course
    only(app, "autograd-q", "metrics")
    client, _ = logged_in(app, "prof")
    spanish = client.get("/courses/pytorch/staff/grades-excel.csv?lang=es")
    assert spanish.data.startswith(b"\xef\xbb\xbf")
    rows = list(csv.reader(io.StringIO(spanish.data.decode("utf-8-sig")), delimiter=";"))
    assert rows[0] == ["username", "name", "email", "metrics", "autograd-q", "total", "percent"]
    assert rows[2] == ["ana", "Ana García", "a@uni.es", "5", "10", "15", "75,0"]
    plain = client.get("/courses/pytorch/staff/grades.csv?lang=es").text
    assert plain.startswith("username,") and "75.0" in plain  # the records' file is the same
    english = client.get("/courses/pytorch/staff/grades-excel.csv?lang=en").data.decode("utf-8-sig")
    assert english == client.get("/courses/pytorch/staff/grades.csv").text


def test_an_empty_course_says_what_to_do_on_the_web_or_the_command_line(app, catalogue):
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        add_user(
            session,
            "prof",
            "Pilar",
            "p@uni.es",
            "instructor",
            "long-password",
            course=the_course(session),
        )
    client, _ = logged_in(app, "prof")
    overview = client.get("/courses/pytorch/staff/").text
    assert (
        'No exercises yet: use “<a href="/courses/pytorch/staff/roster/#exercises">Sync the exercises</a>” '
        'on the roster page, or run <code class="code">hpcgrade exercise sync</code>.' in overview
    )
    assert "`" not in overview
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        sync_exercises(session, the_course(session), catalogue)
    page = client.get("/courses/pytorch/staff/exercises/autograd-q?lang=es").text
    assert (
        "Aún no hay estudiantes: importa una lista en la página "
        '<a href="/courses/pytorch/staff/roster/">Lista de clase</a>, o ejecuta '
        '<code class="code">hpcgrade users import roster.csv</code>.' in page
    )
    assert "`" not in page


def test_a_page_is_in_the_readers_language_whoever_compiled_its_template(marked_course):
    """Jinja applies a filter to a constant as it compiles a template: the gradebook's "100 %"
    stayed in the language of the first reader of the process, for everyone after."""
    app, _ = marked_course
    client, _ = logged_in(app, "prof")

    def maximum(lang: str) -> str:
        page = client.get(f"/courses/pytorch/staff/grades?lang={lang}").text
        return cells(re.search(r'<tr class="maximum">.*?</tr>', page, re.S).group(0))[-1]

    assert (maximum("en"), maximum("es"), maximum("en")) == ("100%", "100 %", "100%")
