"""The classifiers that turn a wrong value or gradient into the most specific code."""
import pytest
import torch

from worker.harness.codes import CATALOGUE
from worker.harness.diagnostics import Diagnostic, compare_grad, compare_values

EXPECTED = torch.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]], dtype=torch.float64)


@pytest.mark.parametrize("actual, code, factor", [
    (EXPECTED.clone(), None, None),
    (None, "grad-none", None),
    (-EXPECTED, "grad-sign-flipped", None),
    (2 * EXPECTED, "grad-accumulated", 2),
    (3 * EXPECTED, "grad-accumulated", 3),
    (0.25 * EXPECTED, "grad-scaled", 0.25),
    (6.5 * EXPECTED, "grad-scaled", 6.5),
    (EXPECTED + torch.tensor([[0, 0, 1.0], [0, 0, 0]]), "grad-mismatch", None),
    (EXPECTED.T, "shape-mismatch", None),
    (EXPECTED * float("nan"), "grad-nonfinite", None),
])
def test_compare_grad(actual, code, factor):
    diagnostic = compare_grad(actual, EXPECTED, "w.grad")
    assert (diagnostic.code if diagnostic else None) == code
    if factor is not None:
        assert diagnostic.details["factor"] == pytest.approx(factor)


def test_grad_mismatch_details_point_at_the_worst_element():
    actual = EXPECTED.clone()
    actual[1, 2] += 10
    details = compare_grad(actual, EXPECTED, "w.grad").details
    assert details["worst_index"] == [1, 2]
    assert details["max_abs_error"] == pytest.approx(10)
    assert details["got"] == pytest.approx(8.5) and details["expected"] == pytest.approx(-1.5)


def test_compare_values_tolerates_float32_rounding():
    assert compare_values(EXPECTED.float(), EXPECTED, "x") is None
    assert compare_values(EXPECTED + 1e-3, EXPECTED, "x").code == "output-mismatch"


@pytest.mark.parametrize("code", sorted(CATALOGUE))
@pytest.mark.parametrize("lang", ["en", "es"])
def test_every_code_renders_in_both_languages(code, lang):
    details = {"what": "x", "name": "f", "error": "boom", "type": "ValueError", "factor": 2.0,
               "got": 1, "expected": 2, "max_abs_error": 0.5, "max_rel_error": 0.1,
               "worst_index": [0], "count": 1}
    message, hint = Diagnostic(code, details).text(lang)
    assert message and hint and "{" not in message + hint and "?" not in message


def test_missing_details_never_break_rendering():
    message, _ = Diagnostic("grad-mismatch", {}).text("en")
    assert message.startswith("the result has wrong values")


def test_unknown_code_is_refused():
    with pytest.raises(ValueError):
        Diagnostic("made-up")


def test_what_can_be_worded_per_language():
    diagnostic = Diagnostic("grad-none", {"what": {"en": "the weight's gradient", "es": "el gradiente del peso"}})
    assert diagnostic.text("en")[0].startswith("the weight's gradient is None")
    assert diagnostic.text("es")[0].startswith("el gradiente del peso es None")


def test_single_numbers_and_empty_messages_read_well():
    number = Diagnostic("output-mismatch", {"what": "`mae(o, t)`", "got": 0.333333, "expected": 1.0,
                                            "worst_index": [], "max_abs_error": 0.67})
    assert number.text("en")[0] == "`mae(o, t)` is 0.333333, expected 1.0."
    bare = Diagnostic("exception", {"what": "`rows`", "type": "NotImplementedError", "error": ""})
    assert bare.text("en")[0] == "`rows` raised NotImplementedError"
    assert bare.text("es")[0] == "`rows` lanzó NotImplementedError"


def test_a_check_can_give_its_own_hint():
    diagnostic = Diagnostic("output-mismatch", {"hint": {"en": "Transpose, do not reshape.",
                                                         "es": "Transpón, no cambies la forma."}})
    assert diagnostic.text("en")[1] == "Transpose, do not reshape."
    assert diagnostic.text("es")[1] == "Transpón, no cambies la forma."
