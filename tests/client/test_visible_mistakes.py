"""`check` names a known wrong program from the visible checks, as the grade would, with the
words of the exercise's visible_mistakes.json (written by `hpcgrade exercise check
--write-visible-mistakes`): a student learns the mistake before spending an attempt."""

import json

from click.testing import CliRunner

from server.core.catalogue import default_root
from worker.cli.main import main

BACKWARD_TWICE = """import torch


def q_grads(a, b, v):
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v, retain_graph=True)
    Q.backward(gradient=v)
    return a.grad, b.grad
"""
SQUARE_FOR_CUBE = default_root() / "autograd-q" / "student_programs" / "square_for_cube.py"


def _check(tmp_path, source: str, lang: str) -> dict:
    work = tmp_path / "work.py"
    work.write_text(source)
    result = CliRunner().invoke(main, ["check", "autograd-q", str(work), "--json", "--lang", lang])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_check_names_a_known_wrong_program_in_the_students_language(tmp_path):
    says = json.loads((default_root() / "autograd-q" / "visible_mistakes.json").read_text())[
        "backward_twice_retained"
    ]["says"]
    report = _check(tmp_path, BACKWARD_TWICE, "es")
    first = next(c for c in report["checks"] if not c["passed"])["diagnostics"][0]
    assert first["details"]["wrong_program"] == "backward_twice_retained"
    assert first["hint"] == says["es"] and first["translations"]["en"]["hint"] == says["en"]
    text = CliRunner().invoke(main, ["check", "autograd-q", str(tmp_path / "work.py")]).output
    assert says["en"].split("`")[0] in text


def test_a_mistake_no_known_program_makes_keeps_the_checks_own_words(tmp_path):
    report = _check(tmp_path, SQUARE_FOR_CUBE.read_text(), "en")
    assert report["score"] < report["max_score"]
    assert not [
        d for c in report["checks"] for d in c["diagnostics"] if "wrong_program" in d["details"]
    ]
