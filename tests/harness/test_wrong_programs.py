"""Known wrong programs are named when a student's values match theirs, one mistake is explained
once, and the self-check holds exercises to both (on a copy of autograd-q with its own table)."""

import json
import shutil

import pytest

from server.core.catalogue import default_root, load_exercise_info
from worker.cli.self_check import self_check

SUM_SAYS = {
    "en": "Your gradient is the one of `Q.sum()`: pass `v` as `gradient=`.",
    "es": "Tu gradiente es el de `Q.sum()`: pasa `v` como `gradient=`.",
}
QUESTION = """import torch

def q_grads(a, b, v):
    Q = {formula}
    Q.backward(gradient={cotangent})
    return a.grad, b.grad
"""
PROGRAMS = {
    "sum_of_q": QUESTION.format(formula="3 * a**3 - b**2", cotangent="torch.ones_like(v)"),
    "half_of_v": QUESTION.format(formula="3 * a**3 - b**2", cotangent="v / 2"),
    "raises": "def q_grads(a, b, v):\n    raise ValueError('no')\n",
}


def _exercise(tmp_path, table: str):
    folder = tmp_path / "autograd-q"
    shutil.copytree(
        default_root() / "autograd-q",
        folder,
        ignore=shutil.ignore_patterns("mutants", "student_programs", "__pycache__"),
    )
    (folder / "mutants").mkdir()
    for name, code in PROGRAMS.items():
        (folder / "mutants" / f"{name}.py").write_text(code)
    toml = folder / "exercise.toml"
    toml.write_text(toml.read_text().split("[mutants")[0] + table)
    return load_exercise_info(folder)


def _says(name: str, code: str, words: dict) -> str:
    return f'[mutants.{name}]\ncode = "{code}"\nsays = {{ en = "{words["en"]}", es = "{words["es"]}" }}\n'


@pytest.fixture
def q_exercise(tmp_path):
    return _exercise(
        tmp_path,
        _says("sum_of_q", "grad-mismatch", SUM_SAYS)
        + _says("half_of_v", "grad-scaled", {"en": "Half.", "es": "La mitad."}),
    )


def test_a_student_whose_values_match_a_wrong_program_is_told_which(harness, q_exercise, tmp_path):
    student = tmp_path / "mine.py"
    student.write_text(PROGRAMS["sum_of_q"].replace("Q =", "Q = 0 * a +"))  # same values, own text
    report = harness.report_for(q_exercise.job(student, seed=5, lang="es")).to_dict()
    first = report["checks"][0]["diagnostics"][0]
    assert (first["code"], first["details"]["wrong_program"]) == ("grad-mismatch", "sum_of_q")
    assert first["hint"] == SUM_SAYS["es"]
    assert first["translations"]["en"]["hint"] == SUM_SAYS["en"]
    assert report["score"] == 0


def test_a_mistake_no_wrong_program_makes_keeps_the_general_hint(harness, q_exercise, tmp_path):
    student = tmp_path / "mine.py"
    student.write_text(QUESTION.format(formula="3 * a**3 + a - b**2", cotangent="v"))
    report = harness.report_for(q_exercise.job(student, seed=5)).to_dict()
    named = [
        d for c in report["checks"] for d in c["diagnostics"] if "wrong_program" in d["details"]
    ]
    assert named == []
    first = report["checks"][0]["diagnostics"][0]
    assert first["code"] == "grad-mismatch" and first["hint"] not in SUM_SAYS.values()


def test_one_mistake_is_explained_once_and_later_checks_point_at_it(harness, q_exercise, tmp_path):
    student = tmp_path / "mine.py"
    student.write_text(PROGRAMS["half_of_v"])
    report = harness.report_for(q_exercise.job(student, seed=2)).to_dict()
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["grad-a"]["diagnostics"][0]["details"]["wrong_program"] == "half_of_v"
    (repeat,) = checks["matrix-inputs"]["diagnostics"]
    assert repeat["code"] == "grad-scaled" and checks["matrix-inputs"]["points"] == 0
    assert repeat["message"] == (
        "a.grad: most likely the same mistake as in “a.grad = 9a²·v”, explained there."
    )
    assert repeat["translations"]["es"]["message"].startswith(
        "a.grad: lo más probable es que sea el mismo error que en «"
    )


@pytest.mark.selfcheck
def test_the_self_check_refuses_a_wrong_program_it_cannot_recognise(
    harness, second_harness, tmp_path
):
    info = _exercise(tmp_path, _says("raises", "exception", {"en": "It raises.", "es": "Lanza."}))
    (problem,) = self_check(harness, info, (0,), write_visible_mistakes=True, second=second_harness)
    assert problem.startswith("known wrong program raises was not recognised (seed 0)")


@pytest.mark.selfcheck
def test_the_self_check_holds_student_programs_to_their_code_and_words(
    harness, second_harness, tmp_path
):
    """A student program must lose points, with its code, and a diagnostic of that code must say
    the words that name its mistake in each language; the reference itself is no wrong program."""

    def student_program(name: str, code: str, en: str, es: str) -> str:
        return (
            f'[student_programs.{name}]\ncode = "{code}"\nnames = {{ en = "{en}", es = "{es}" }}\n'
        )

    table = (
        student_program("sum_of_q", "grad-mismatch", "Q.sum()", "Q.sum()")
        + student_program("half_of_v", "grad-scaled", "0.5 times", "0.5 veces")
        + student_program("right", "grad-mismatch", "anything", "nada")
    )
    folder = _exercise(tmp_path, _says("sum_of_q", "grad-mismatch", SUM_SAYS)).path
    (folder / "student_programs").mkdir()
    for name in ("sum_of_q", "half_of_v"):
        (folder / "student_programs" / f"{name}.py").write_text(PROGRAMS[name])
    (folder / "student_programs" / "right.py").write_text((folder / "reference.py").read_text())
    toml = folder / "exercise.toml"
    toml.write_text(toml.read_text() + table)
    problems = self_check(
        harness,
        load_exercise_info(folder),
        (4,),
        write_visible_mistakes=True,
        second=second_harness,
    )
    assert problems == ["student program right scored full marks (seed 4)"], problems
    table = table.replace('"0.5 veces"', '"la mitad exacta"')
    toml.write_text(
        toml.read_text().split("[student_programs")[0] + table.split("[student_programs.right]")[0]
    )
    (problem,) = self_check(
        harness,
        load_exercise_info(folder),
        (4,),
        write_visible_mistakes=True,
        second=second_harness,
    )
    assert problem.startswith(
        "student program half_of_v: no grad-scaled diagnostic says "
        "“la mitad exacta” in es (seed 4); it says: "
    )


@pytest.mark.selfcheck
def test_the_self_check_holds_visible_mistakes_to_the_known_wrong_programs(
    harness, second_harness, q_exercise
):
    """`check` names a known wrong program from the failures of the visible checks that
    visible_mistakes.json holds: the self-check wants them to be the programs' own, and
    --write-visible-mistakes writes them, with the programs' words and none of their code."""
    (stale,) = self_check(
        harness, q_exercise, (4,), second=second_harness
    )  # autograd-q's file: other programs
    assert stale.startswith("visible_mistakes.json does not hold the known wrong programs'")
    assert "--write-visible-mistakes" in stale
    assert (
        self_check(harness, q_exercise, (4,), write_visible_mistakes=True, second=second_harness)
        == []
    )
    assert self_check(harness, q_exercise, (4,), second=second_harness) == []
    written = json.loads((q_exercise.path / "visible_mistakes.json").read_text())
    assert written["sum_of_q"]["says"] == SUM_SAYS and "Q.backward" not in json.dumps(written)
    assert set(written["sum_of_q"]["marks"]) == {"cotangent-v", "matrix-in-leaves"}


def test_the_reference_passes_the_visible_checks_without_a_reference(harness, catalogue):
    info = catalogue["autograd-q"]
    report = harness.report_for(info.job(info.path / "reference.py", visible=True)).to_dict()
    assert report["status"] == "graded" and report["score"] == report["max_score"] > 0
    hidden = {
        c["name"]
        for c in harness.report_for(info.job(info.path / "reference.py")).to_dict()["checks"]
    }
    assert not hidden & {c["name"] for c in report["checks"]}


def test_the_second_look_costs_the_student_nothing(harness, q_exercise, tmp_path):
    """The wrong programs' reruns happen in a process of their own: the same points and the same
    output as without them, even for code that spends most of its CPU time limit."""
    student = tmp_path / "mine.py"
    student.write_text(
        PROGRAMS["sum_of_q"]
        .replace(
            "    Q =",
            """    print("called")
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:
        pass
    Q =""",
        )
        .replace("import torch", "import time\nimport torch")
    )
    job = q_exercise.job(student, seed=3)
    tight = dict(job.to_dict(), limits={"cpu_seconds": 2})
    named = harness.report_for(type(job).from_dict(tight)).to_dict()
    plain = harness.report_for(type(job).from_dict(dict(tight, wrong_programs={}))).to_dict()
    assert [c["points"] for c in named["checks"]] == [c["points"] for c in plain["checks"]]
    assert named["output"] == plain["output"] and named["output"].count("called") >= 4
    assert named["checks"][0]["diagnostics"][0]["details"]["wrong_program"] == "sum_of_q"


# a speed bonus on a machine that grows busy: it passes the first time it runs in the grader
# (the student's own run) and fails every time after (a wrong program's, in the second look)
SLOWER_EACH_RUN = """

_RUNS = []


@check("speed-bonus", points=1, uses="q_grads", timed=True, en="bonus: fast", es="bonus: rápido")
def speed_bonus(ctx: Context) -> None:
    _RUNS.append(1)
    if len(_RUNS) > 1:
        raise Fail(Diagnostic("timeout", {"what": "q_grads", "seconds": 1.0}))
"""


def test_a_wrong_program_is_named_whatever_a_timed_check_says_on_its_second_run(
    harness, q_exercise, tmp_path
):
    """A wrong program names the mistake when the code's values are its values in the checks
    the code passed: a timed one is no such check, since a loaded machine decides it (CI, beside
    other work, left conv2d-einsum's known wrong program unnamed on a fixed seed)."""
    checks = q_exercise.path / "checks.py"
    checks.write_text(checks.read_text() + SLOWER_EACH_RUN)  # it imports check, Fail, Diagnostic
    student = tmp_path / "mine.py"
    student.write_text(PROGRAMS["sum_of_q"].replace("Q =", "Q = 0 * a +"))
    report = harness.report_for(load_exercise_info(q_exercise.path).job(student, seed=5)).to_dict()
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["speed-bonus"]["passed"]
    first = report["checks"][0]["diagnostics"][0]
    assert (first["code"], first["details"].get("wrong_program")) == ("grad-mismatch", "sum_of_q")
