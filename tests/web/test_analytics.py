"""Analytics by check and by named mistake (server/web/course.py check_rates, mistake_counts):
each check's pass rate on the students' counted submissions and on all their submissions, the
students who made each named mistake (a known wrong program in the exercise's own words, or a
hint within its code), the links to the submissions behind them, and queries whose number does
not grow with the students. On SQLite and PostgreSQL."""

import hashlib
import html
import re

import pytest
from helpers import logged_in
from sqlalchemy import event, select

from server.core.models import (
    CheckResult,
    DiagnosticResult,
    Exercise,
    GradingRun,
    Submission,
    User,
    utcnow,
)
from server.core.users import add_user
from server.web.course import check_rates, diagnosed_submissions, mistake_counts, standings

STAFF = "/courses/pytorch/staff"
SAYS_EN = (
    "Your gradient is the one of `Q.sum()` (a cotangent of ones): pass `v` as "
    "`gradient=`, `Q.backward(gradient=v)`."
)
SAYS_ES = (
    "Tu gradiente es el de `Q.sum()` (un cotangente de unos): pasa `v` como `gradient=`, "
    "`Q.backward(gradient=v)`."
)
SIGN_HINT = "Check the sign of `b`'s term."


def diagnostic(code: str, hint: str = "", **details) -> DiagnosticResult:
    return DiagnosticResult(
        code=code,
        message=f"`{code}` said",
        hint=hint,
        details=details,
        translations={"es": {"message": f"`{code}` dicho", "hint": f"{hint} (es)" if hint else ""}},
    )


def graded(
    session, user: User, exercise: Exercise, score: float, checks: dict[str, list[DiagnosticResult]]
) -> int:
    """A submission graded out of 10 with one check a name; a check with diagnostics failed."""
    submission = Submission(
        user_id=user.id,
        exercise_id=exercise.id,
        filename="work.py",
        code=b"x = 1\n",
        sha256=hashlib.sha256(b"x").hexdigest(),
        status="graded",
        score=score,
        max_score=10.0,
    )
    session.add(submission)
    session.flush()
    run = GradingRun(
        submission_id=submission.id,
        attempt=1,
        executor="local",
        status="done",
        lease_until=utcnow(),
        score=score,
        max_score=10.0,
    )
    run.checks = [
        CheckResult(
            position=i,
            name=name,
            title=f"The {name}",
            points=0,
            max_points=5,
            passed=not found,
            diagnostics=found,
            titles={"es": f"Los {name}"},
        )
        for i, (name, found) in enumerate(checks.items())
    ]
    session.add(run)
    session.flush()
    return submission.id


def wrong_program(code: str) -> DiagnosticResult:
    # the words stored with the run are older than the exercise's: the catalogue's are shown
    return diagnostic(code, "stored words", wrong_program="sum_ignoring_v")


@pytest.fixture
def analysed(course):
    """autograd-q: ana 4 (the Q.sum() mistake in grads) then 10 (counts); bea 3 (the sign in
    values, the Q.sum() mistake in grads, said again by a later check); carl 5 (the Q.sum()
    mistake, under another code); dan nothing; prof (an instructor) the Q.sum() mistake, left
    out. Returns the app and the exercise's id."""
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password")
        add_user(session, "dan", "Dan", "d@uni.es", "student", "long-password")
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        users = {u.username: u for u in session.scalars(select(User))}
        q = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        graded(
            session, users["ana"], q, 4, {"values": [], "grads": [wrong_program("grad-mismatch")]}
        )
        graded(session, users["ana"], q, 10, {"values": [], "grads": []})
        graded(
            session,
            users["bea"],
            q,
            3,
            {
                "values": [diagnostic("grad-sign-flipped", SIGN_HINT)],
                "grads": [wrong_program("grad-mismatch")],
                "later": [diagnostic("grad-mismatch", "", same_as="grads")],
            },
        )
        graded(
            session, users["carl"], q, 5, {"values": [], "grads": [wrong_program("grad-scaled")]}
        )
        graded(
            session, users["prof"], q, 0, {"values": [], "grads": [wrong_program("grad-mismatch")]}
        )
        session.commit()
        exercise_id = q.id
        session.close()
    return course, exercise_id


def course_id(session) -> int:
    return session.scalar(select(Exercise.course_id).where(Exercise.slug == "autograd-q"))


def rates(app, exercise_id, lang="en"):
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        table = standings(session, course_id(session), exercise_id)
        counted = {s.grade.best_id for s in table.values()}
        return check_rates(session, course_id(session), exercise_id, counted, lang)


def test_each_check_passes_on_counted_and_on_all_submissions(analysed):
    app, exercise_id = analysed
    found = {rate.name: rate for rate in rates(app, exercise_id)}
    assert list(found) == ["values", "grads", "later"]  # in the order they run
    values, grads, later = found.values()
    # counted: ana's 10, bea's 3, carl's 5 (the instructor's left out); all: ana's two too
    assert (
        values.students_passed,
        values.students,
        values.submissions_passed,
        values.submissions,
    ) == (2, 3, 3, 4)
    assert (grads.students_passed, grads.students, grads.submissions_passed, grads.submissions) == (
        1,
        3,
        1,
        4,
    )
    assert values.student_rate == pytest.approx(2 / 3) and grads.submission_rate == 0.25
    assert (later.students_passed, later.students, later.submissions) == (0, 1, 1)
    assert values.title == "The values"
    assert [rate.title for rate in rates(app, exercise_id, "es")][:2] == ["Los values", "Los grads"]


def test_a_named_mistake_counts_students_in_the_exercises_words(analysed):
    app, exercise_id = analysed
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        mistakes = mistake_counts(session, course_id(session), "en", exercise_id)[exercise_id]
        spanish = mistake_counts(session, course_id(session), "es")[exercise_id]
    q_sum, sign = mistakes
    # one mistake under two codes, its students once each: ana, bea, carl
    assert q_sum.wrong_program == "sum_ignoring_v" and q_sum.words == SAYS_EN
    assert (q_sum.students, q_sum.submissions) == (3, 3)
    assert q_sum.codes == ["grad-mismatch", "grad-scaled"]
    assert q_sum.anchor == "mistake-sum_ignoring_v"
    assert q_sum.gist == "Your gradient is the one of `Q.sum()` (a cotangent of ones)…"
    assert (sign.words, sign.wrong_program, sign.students, sign.codes) == (
        SIGN_HINT,
        None,
        1,
        ["grad-sign-flipped"],
    )
    assert sign.gist == SIGN_HINT  # a full stop at the end cuts nothing
    assert spanish[0].words == SAYS_ES and spanish[1].words == f"{SIGN_HINT} (es)"


def test_the_queries_do_not_grow_with_the_students(analysed):
    """One query a table, whatever the number of students: 3 students, then 33."""
    app, exercise_id = analysed
    engine = app.extensions["hpcgrade.db"].engine

    def queries() -> int:
        seen = []
        listen = lambda *args: seen.append(args[2])  # noqa: E731 - the statement
        event.listen(engine, "before_cursor_execute", listen)
        try:
            rates(app, exercise_id)
            with app.app_context():
                session = app.extensions["hpcgrade.db"].sessions()
                mistake_counts(session, course_id(session), "en", exercise_id)
        finally:
            event.remove(engine, "before_cursor_execute", listen)
        return len([s for s in seen if "check_results" in s or "diagnostics" in s])

    few = queries()
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        q = session.get(Exercise, exercise_id)
        for n in range(30):
            user = add_user(session, f"s{n}", f"S {n}", f"s{n}@uni.es", "student", "long-password")
            graded(session, user, q, 3, {"values": [], "grads": [wrong_program("grad-mismatch")]})
        session.commit()
    assert queries() == few <= 3
    found = {rate.name: rate for rate in rates(app, exercise_id)}
    assert (found["grads"].students_passed, found["grads"].students) == (1, 33)


def test_the_exercise_page_shows_pass_rates_and_mistakes_linked_to_their_submissions(analysed):
    app, _ = analysed
    prof, _ = logged_in(app, "prof")
    page = prof.get(f"{STAFF}/exercises/autograd-q").text
    checks = re.search(r'<section class="card" id="checks".*?</section>', page, re.S).group(0)
    rows = [
        re.sub(r"<[^>]+>|\s+", " ", row).split()
        for row in re.findall(r"<tr><th scope=\"row\".*?</tr>", checks, re.S)
    ]
    assert (
        " ".join(rows[0])
        == "The values 66.7% 2 of 3 students passed 75.0% 3 of 4 submissions passed"
    )
    assert (
        " ".join(rows[1])
        == "The grads 33.3% 1 of 3 students passed 25.0% 1 of 4 submissions passed"
    )
    mistakes = re.search(r'<section class="card" id="mistakes".*?</section>', page, re.S).group(0)
    assert mistakes.index("3 students made this mistake") < mistakes.index("1 student made this")
    assert "Your gradient is the one of <code>Q.sum()</code>" in mistakes
    assert "stored words" not in mistakes
    link = f"{STAFF}/exercises/autograd-q/diagnostics/grad-mismatch#mistake-sum_ignoring_v"
    assert f'href="{link}"' in mistakes
    assert (
        f'href="{STAFF}/exercises/autograd-q/diagnostics/grad-scaled#mistake-sum_ignoring_v"'
        in mistakes
    )
    # the code chart and table stay
    assert re.search(r"grad-mismatch</code></a></td><td>2</td><td>2</td>", page)
    # the link lands on the mistake's section of the diagnostic's page
    behind = prof.get(link.split("#")[0]).text
    section = re.search(
        r'<section[^>]* id="mistake-sum_ignoring_v".*?</section>', behind, re.S
    ).group(0)
    assert "Ana" in section and "Bea" in section and "Carl" not in section
    sign = next(m for m in re.findall(r'href="([^"]*grad-sign-flipped#[^"]*)"', mistakes))
    assert f'id="{sign.split("#")[1]}"' in prof.get(sign.split("#")[0]).text


def test_the_course_page_names_the_most_frequent_mistakes(analysed):
    app, _ = analysed
    prof, _ = logged_in(app, "prof")
    page = prof.get(f"{STAFF}/").text
    row = re.search(r"Gradients of a non-scalar function.*?</tr>", page, re.S).group(0)
    cell = re.search(r'<td class="mistakes">(.*?)</td>', row, re.S).group(1)
    assert [html.unescape(re.sub(r"<[^>]+>", "", part)).strip() for part in cell.split("<br>")] == [
        "Your gradient is the one of Q.sum() (a cotangent of ones)… 3 students",
        "Check the sign of b's term. 1 student",
    ]
    assert f'{STAFF}/exercises/autograd-q/diagnostics/grad-mismatch#mistake-sum_ignoring_v"' in cell


def test_a_mistake_without_hint_is_named_by_its_code(analysed):
    app, exercise_id = analysed
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        ana = session.scalar(select(User).where(User.username == "ana"))
        graded(
            session, ana, session.get(Exercise, exercise_id), 2, {"values": [diagnostic("timeout")]}
        )
        session.commit()
    prof, _ = logged_in(app, "prof")
    page = prof.get(f"{STAFF}/exercises/autograd-q").text
    assert "timeout, with no hint" in page
    assert re.search(
        r'<code class="code">timeout</code></a> <small class="muted">1 student<',
        prof.get(f"{STAFF}/").text,
    )


def test_a_derived_mistake_is_counted_once_in_words_of_no_ones_line(analysed):
    """Two students whose values are one derived wrong program's (worker/harness/derived.py),
    each told their own line: one mistake, in words that name neither line."""
    app, exercise_id = analysed
    mistake = {
        "en": "Your values are the ones the reference solution gives with `a`.",
        "es": "Tus valores son los que da la solución de referencia con `a`.",
    }
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        for username, line in (("carl", 4), ("dan", 9)):
            user = session.scalar(select(User).where(User.username == username))
            graded(
                session,
                user,
                session.get(Exercise, exercise_id),
                1,
                {
                    "values": [
                        diagnostic(
                            "output-mismatch",
                            f"{mistake['en']} Look at line {line}: `a`.",
                            wrong_program="derived:q_grads:5:3",
                            mistake=mistake,
                            line=line,
                        )
                    ]
                },
            )
        session.commit()
        mistakes = mistake_counts(session, course_id(session), "es", exercise_id)[exercise_id]
        (derived,) = [m for m in mistakes if m.wrong_program == "derived:q_grads:5:3"]
        assert (derived.words, derived.students) == (mistake["es"], 2)
        (listed,) = [
            m
            for m in diagnosed_submissions(
                session, course_id(session), exercise_id, "output-mismatch", "en"
            )
            if m.wrong_program == "derived:q_grads:5:3"
        ]
        assert (listed.hint, listed.students) == (mistake["en"], 2)


def test_one_mistake_told_at_each_students_line_and_names_is_one_row(analysed):
    """The hint carries each student's line and names: three students who left the graph the
    same way (lines 3, 7 and 12), and two whose gradient was cleared, told of `a.grad` and
    `b.grad`, are two mistakes of 3 and 2 students (one of them twice), not five of 1."""
    app, exercise_id = analysed
    cleared = {"en": "{what} is all zeros: clear it after using it.", "es": "{what} es todo ceros."}
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        users = {u.username: u for u in session.scalars(select(User))}
        q = session.get(Exercise, exercise_id)
        for username, line in (("ana", 3), ("carl", 7), ("dan", 12)):
            left = diagnostic(
                "detached-output",
                f"Your code leaves the graph here: line {line}, `x{line}.detach()`: it returns a "
                "tensor cut off from the graph. Keep the values you differentiate…",
                left_at=[["detach", "submission.py", line]],
                line=line,
            )
            graded(session, users[username], q, 1, {"grads": [left]})
        for username, name in (("carl", "a"), ("dan", "b"), ("dan", "a")):
            zeros = diagnostic(
                "grad-mismatch", f"`{name}.grad` is all zeros: clear it after using it."
            )
            zeros.details = {"hint": cleared, "what": f"`{name}.grad`"}  # the check's words
            graded(session, users[username], q, 2, {"values": [zeros]})
        session.commit()
        for lang in ("en", "es"):
            mistakes = mistake_counts(session, course_id(session), lang, exercise_id)[exercise_id]
            left = [m for m in mistakes if m.codes == ["detached-output"]]
            zeros = [m for m in mistakes if "zeros" in m.words or "ceros" in m.words]
            assert [(m.students, m.submissions) for m in left] == [(3, 3)]
            assert [(m.students, m.submissions) for m in zeros] == [(2, 3)]
            assert "line" not in left[0].words and "línea" not in left[0].words
            assert "`.detach()`" in left[0].words
        assert left[0].words.startswith("El código sale del grafo por `.detach()`")
        listed = diagnosed_submissions(
            session, course_id(session), exercise_id, "detached-output", "en"
        )
        assert [(m.students, m.anchor) for m in listed] == [(3, left[0].anchor)]
        assert "line" not in listed[0].hint
        (cleared_listed,) = [
            m
            for m in diagnosed_submissions(
                session, course_id(session), exercise_id, "grad-mismatch", "en"
            )
            if "zeros" in m.hint
        ]
        assert cleared_listed.students == 2
    prof, _ = logged_in(app, "prof")
    page = prof.get(f"{STAFF}/exercises/autograd-q").text
    mistakes = re.search(r'<section class="card" id="mistakes".*?</section>', page, re.S).group(0)
    assert "3 students made this mistake" in mistakes and "line 7" not in mistakes
    behind = prof.get(f"{STAFF}/exercises/autograd-q/diagnostics/detached-output").text
    assert len(re.findall(r'<section[^>]* id="mistake-', behind)) == 1


def test_the_same_words_in_two_checks_are_two_mistakes(analysed):
    """A mistake is a check's: the same hint from two checks is counted under each."""
    app, exercise_id = analysed
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        dan = session.scalar(select(User).where(User.username == "dan"))
        q = session.get(Exercise, exercise_id)
        graded(
            session,
            dan,
            q,
            0,
            {"values": [diagnostic("timeout")], "grads": [diagnostic("timeout")]},
        )
        session.commit()
        mistakes = mistake_counts(session, course_id(session), "en", exercise_id)[exercise_id]
        assert [m.students for m in mistakes if m.codes == ["timeout"]] == [1, 1]
