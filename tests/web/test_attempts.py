"""Issue 23, a student's history of an exercise (server/web/attempts.py): every attempt with its
score, which one counts and why (grades.student_grade's rule: the best, the first of equal ones,
an adjusted score, a late penalty, a grade set by hand), the checks that changed between two
attempts and their code's difference, escaped and marked in words; the student's own, and any
student's for the course's staff, no one else's."""

import re
from html import unescape

import pytest
from course_data import submit
from helpers import logged_in, the_course
from sqlalchemy import select

from server.core.models import Exercise, GradingRun, SetGrade, Submission, User, utcnow
from server.web.attempts import MOST_COMPARED_LINES, MOST_DIFF_ROWS, check_changes, code_diff

MINE = "/courses/pytorch/exercises/autograd-q/attempts"


def staff_page(username: str) -> str:
    return f"/courses/pytorch/staff/students/{username}/attempts/autograd-q"


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))


def standing(page: str, submission_id: int) -> str:
    """The "Counts?" cell of the attempt's row, as text."""
    row = re.search(
        rf'<tr[^>]*>\s*<td class="col-id"><a [^>]*>#{submission_id}</a>.*?</tr>', page, re.S
    ).group(0)
    return text_of(re.search(r'class="col-standing"[^>]*>(.*?)</td>', row, re.S).group(1)).strip()


def attempts(app, *made) -> dict[str, int]:
    """Ana's (or another's) submissions of autograd-q, written straight to the database:
    (name, username, score, keyword arguments of course_data.submit); their ids by name."""
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        course = the_course(session)
        q = session.scalar(
            select(Exercise).where(Exercise.course_id == course.id, Exercise.slug == "autograd-q")
        )
        users = {u.username: u for u in session.scalars(select(User))}
        return {
            name: submit(session, users[username], q, score, **values).id
            for name, username, score, values in made
        }


@pytest.fixture
def history(marked_course):
    """ana on autograd-q: 4 (a diagnostic) then 10 (marked_course), then 10 again, then one
    graded 8 and 2 days late (−50 %: 4), then one whose grading was stopped."""
    app, ids = marked_course
    ids |= attempts(
        app,
        ("tie", "ana", 10, {"code": b"ana = 3\n", "minutes": 9}),
        ("late", "ana", 4, {"code": b"ana = 4\n", "minutes": 12}),
        ("stopped", "ana", None, {"status": "cancelled", "minutes": 14}),
    )
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        late = session.get(Submission, ids["late"])
        late.late_days, late.penalty = 2, 0.5
        session.scalar(select(GradingRun).where(GradingRun.submission_id == late.id)).score = 8
    return app, ids


def test_every_attempt_says_whether_it_counts_and_why(history):
    app, ids = history
    client, _token = logged_in(app)
    page = client.get(MINE).text
    assert "5 attempts" in text_of(page)
    assert standing(page, ids["ana-q-2"]) == "Counts: the best score"
    assert (
        standing(page, ids["tie"])
        == f"Does not count: the same score as #{ids['ana-q-2']}, sent earlier"
    )
    assert standing(page, ids["ana-q-1"]) == f"Does not count: lower than #{ids['ana-q-2']}"
    assert (
        standing(page, ids["stopped"])
        == "Does not count: its grading was stopped, and it used no attempt"
    )
    # the late one: the run's 8, the penalty, and the 4 that competes
    assert "4 / 10 graded 8 / 10; 2 days late: −50%" in text_of(page)
    assert f"The grade: 10 / 10 From #{ids['ana-q-2']}, the best score." in text_of(page)
    # newest first, each with a link to compare it with the one before
    assert page.index(f">#{ids['stopped']}<") < page.index(f">#{ids['ana-q-1']}<")
    assert f"?old={ids['ana-q-1']}&amp;new={ids['ana-q-2']}#changes" in page


def test_an_adjusted_score_and_a_grade_set_by_hand_say_so(marked_course):
    app, ids = marked_course
    ids |= attempts(app, ("adjusted", "ana", 2, {"override": 10.0, "minutes": 8}))
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.get(Submission, ids["adjusted"]).override_at = utcnow()
    client, _token = logged_in(app)
    page = client.get(MINE).text
    # the adjusted 10 and the graded 10 are equal: the first sent counts
    assert standing(page, ids["ana-q-2"]) == "Counts: the best score"
    assert "automatic score: 2 / 10" in text_of(page)
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        ana = session.scalar(select(User).where(User.username == "ana"))
        q = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        session.add(
            SetGrade(user_id=ana.id, exercise_id=q.id, score=7.0, comment="Agreed **in person**.")
        )
    page = client.get(MINE).text
    assert "The grade: 7 / 10" in text_of(page) and "<strong>in person</strong>" in page
    assert {standing(page, ids[name]) for name in ("ana-q-1", "ana-q-2", "adjusted")} == {
        "Does not count: the grade was set by the course's staff"  # set_by: nobody's now
    }


def test_the_latest_two_are_compared_checks_and_code(marked_course):
    """ana's 4 (a failed check with a diagnostic) then 10: the check now passes, its points and
    its diagnostic changed; the code's lines removed and added, each said in words."""
    app, ids = marked_course
    client, _token = logged_in(app)
    page = client.get(MINE).text
    changes = page[page.index('id="changes"') :]
    assert f"From #{ids['ana-q-1']} to #{ids['ana-q-2']}" in text_of(changes)
    assert "failed → passed" in text_of(changes) and "points: 4 → 10" in text_of(changes)
    assert "gone: grad-sign-flipped grad-sign-flipped in English" in text_of(changes)
    assert re.search(
        r'<tr class="removed"><td class="line-no">1</td><td class="line-no"></td>\s*'
        r'<td class="diff-sign"><span aria-hidden="true">−</span>'
        r'<span class="visually-hidden">removed</span></td>\s*'
        r'<td class="line">x = 1</td>',
        changes,
    )
    assert (
        '<span class="visually-hidden">added</span></td>\n      <td class="line">ana = 2</td>'
        in changes
    )


def test_code_is_escaped_and_the_same_code_is_said(marked_course):
    app, ids = marked_course
    ids |= attempts(
        app,
        ("a", "ana", 5, {"code": b"# </td><script>alert(1)</script>\n"}),
        ("b", "ana", 5, {"code": b"# </td><script>alert(1)</script>\n"}),
        ("c", "ana", 5, {"code": b"x = '<b>'\n"}),
    )
    client, _token = logged_in(app)
    page = client.get(f"{MINE}?old={ids['a']}&new={ids['c']}").text
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x = &#39;&lt;b&gt;&#39;" in page
    assert "Every check gave the same result." in page
    page = client.get(f"{MINE}?old={ids['b']}&new={ids['a']}").text  # either order
    assert f"From #{ids['a']} to #{ids['b']}" in text_of(page)
    assert "The code is the same." in page


def test_a_notebook_is_compared_cell_by_cell(marked_course):
    from helpers import notebook

    app, ids = marked_course
    ids |= attempts(
        app,
        *[
            (
                name,
                "ana",
                None,
                {"status": "queued", "filename": "work.ipynb", "code": notebook(*cells).encode()},
            )
            for name, cells in (
                ("nb1", ("import torch", "x = 1\ny = 2")),
                ("nb2", ("import torch", "x = 1\ny = 3")),
            )
        ],
    )
    client, _token = logged_in(app, lang="es")
    page = client.get(f"{MINE}?old={ids['nb1']}&new={ids['nb2']}").text
    changes = page[page.index('id="changes"') :]
    assert "# %% celda 2" in changes
    # y is line 2 of cell 2 on both sides
    assert re.search(r'<tr class="removed"><td class="line-no">2</td>.*?y = 2', changes, re.S)
    assert re.search(
        r'<tr class="added"><td class="line-no"></td><td class="line-no">2</td>.*?y = 3',
        changes,
        re.S,
    )


def test_only_the_student_and_the_staff_see_a_history(marked_course):
    app, ids = marked_course
    bea, _token = logged_in(app, "bea")
    page = bea.get(MINE).text
    assert f">#{ids['bea-q']}<" in page and f">#{ids['ana-q-1']}<" not in page
    # another student's submission is not in this history
    assert bea.get(f"{MINE}?old={ids['bea-q']}&new={ids['ana-q-1']}").status_code == 404
    assert bea.get(staff_page("ana")).status_code == 403
    assert bea.get("/courses/pytorch/exercises/no-such/attempts").status_code == 404

    prof, _token = logged_in(app, "prof")
    page = prof.get(staff_page("ana")).text
    assert (
        "Ana García's attempts: Gradients of a non-scalar function" in text_of(page)
        and f">#{ids['ana-q-2']}<" in page
    )
    assert f"/courses/pytorch/staff/students/ana/attempts/autograd-q?old={ids['ana-q-1']}" in page
    assert prof.get(staff_page("prof")).status_code == 404  # staff have no student history


def test_the_exercise_the_result_and_the_staff_student_pages_link_to_the_history(marked_course):
    app, ids = marked_course
    client, _token = logged_in(app)
    assert f'href="{MINE}"' in client.get("/courses/pytorch/exercises/autograd-q").text
    assert f'href="{MINE}"' in client.get(f"/courses/pytorch/submissions/{ids['ana-q-1']}").text
    prof, _token = logged_in(app, "prof")
    assert f'href="{staff_page("ana")}"' in prof.get("/courses/pytorch/staff/students/ana").text
    assert (
        f'href="{staff_page("ana")}"'
        in prof.get(f"/courses/pytorch/submissions/{ids['ana-q-1']}").text
    )


# --- the differences themselves ---------------------------------------------------------------


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), start=1))


def test_unchanged_lines_far_from_a_change_are_a_gap():
    old = numbered("\n".join(f"line {n}" for n in range(1, 21)))
    new = [(n, "changed" if n == 10 else text) for n, text in old]
    rows, cut = code_diff(old, new)
    assert [row.kind for row in rows] == [
        "gap",
        "same",
        "same",
        "same",
        "removed",
        "added",
        "same",
        "same",
        "same",
        "gap",
    ]
    assert (rows[4].old, rows[4].new, rows[5].old, rows[5].new) == (10, None, None, 10)
    assert not cut
    assert code_diff(old, old) == ([], False)


def test_a_very_long_difference_is_cut():
    rows, cut = code_diff(numbered("a\n" * 5000), numbered("b\n" * 5000))
    assert cut and len(rows) == MOST_DIFF_ROWS


def test_long_files_are_compared_in_their_first_lines_only(marked_course):
    """difflib takes minutes over two files of 100,000 lines (a 1 MB upload): only the first
    MOST_COMPARED_LINES of each are compared, and the page says so."""
    app, ids = marked_course
    long_code = "".join(f"x{n} = {n}\n" for n in range(100_000))
    ids |= attempts(
        app,
        ("long", "ana", 5, {"code": long_code.encode()}),
        (
            "reversed",
            "ana",
            5,
            {"code": "".join(reversed(long_code.splitlines(keepends=True))).encode()},
        ),
    )
    client, _token = logged_in(app)
    page = client.get(f"{MINE}?old={ids['long']}&new={ids['reversed']}").text
    assert f"the first {MOST_COMPARED_LINES} lines of each attempt are compared" in page
    assert page.count('<tr class="removed">') + page.count('<tr class="added">') <= MOST_DIFF_ROWS


def test_checks_changes_by_name():
    def check(name, passed, points, *diagnostics):
        return {
            "name": name,
            "title": name,
            "passed": passed,
            "points": points,
            "max_points": 5,
            "diagnostics": [{"code": c, "message": m} for c, m in diagnostics],
        }

    before = [check("a", True, 5), check("b", False, 1, ("x", "one")), check("gone", True, 5)]
    after = [
        check("a", False, 0),
        check("b", False, 2, ("x", "one"), ("y", "two")),
        check("new", True, 5),
    ]
    changes = {c.title: c for c in check_changes(before, after)}
    assert list(changes) == ["a", "b", "new", "gone"]
    assert changes["b"].new == [{"code": "y", "message": "two"}] and changes["b"].gone == []
    assert changes["new"].before is None and changes["gone"].after is None
