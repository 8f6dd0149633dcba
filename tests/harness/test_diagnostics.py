"""The classifiers that turn a wrong value or gradient into the most specific code."""

from dataclasses import replace

import pytest
import torch
from helpers import ONE_BACKWARD_PER_WINDOW

from server.core.catalogue import default_root
from worker.harness.checks import diagnose_exception
from worker.harness.codes import (
    BACKWARD_ON,
    CATALOGUE,
    DETACHED_BACKWARD,
    EINSUM_SUBSCRIPTS,
    GRAD_CLEARED,
    LEAF_IN_PLACE,
    NUMPY_LEAVES_THE_GRAPH,
    ONE_ELEMENT_ONLY,
    PERMUTE_DIMENSIONS,
    SAME_DEVICE,
    SAME_DTYPE,
    VIEW_SIZE,
    VIEW_STRIDES,
)
from worker.harness.diagnostics import Diagnostic, compare_grad, compare_values

EXPECTED = torch.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]], dtype=torch.float64)


@pytest.mark.parametrize(
    "actual, code, factor",
    [
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
    ],
)
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
    details = {
        "what": "x",
        "name": "f",
        "error": "boom",
        "type": "ValueError",
        "factor": 2.0,
        "got": 1,
        "expected": 2,
        "max_abs_error": 0.5,
        "max_rel_error": 0.1,
        "worst_index": [0],
        "count": 1,
        "budget": 60.0,
    }
    message, hint = Diagnostic(code, details).text(lang)
    assert message and hint and "{" not in message + hint and "?" not in message


def test_missing_details_never_break_rendering():
    message, _ = Diagnostic("grad-mismatch", {}).text("en")
    assert message.startswith("the result has wrong values")


def test_unknown_code_is_refused():
    with pytest.raises(ValueError):
        Diagnostic("made-up")


def test_what_can_be_worded_per_language():
    diagnostic = Diagnostic(
        "grad-none", {"what": {"en": "the weight's gradient", "es": "el gradiente del peso"}}
    )
    assert diagnostic.text("en")[0].startswith("the weight's gradient is None")
    assert diagnostic.text("es")[0].startswith("el gradiente del peso es None")


def test_single_numbers_and_empty_messages_read_well():
    number = Diagnostic(
        "output-mismatch",
        {
            "what": "`mae(o, t)`",
            "got": 0.333333,
            "expected": 1.0,
            "worst_index": [],
            "max_abs_error": 0.67,
        },
    )
    assert number.text("en")[0] == "`mae(o, t)` is 0.333333, expected 1.0."
    bare = Diagnostic("exception", {"what": "`rows`", "type": "NotImplementedError", "error": ""})
    assert bare.text("en")[0] == "`rows` raised NotImplementedError"
    assert bare.text("es")[0] == "`rows` lanzó NotImplementedError"


def test_a_check_can_give_its_own_hint():
    diagnostic = Diagnostic(
        "output-mismatch",
        {"hint": {"en": "Transpose, do not reshape.", "es": "Transpón, no cambies la forma."}},
    )
    assert diagnostic.text("en")[1] == "Transpose, do not reshape."
    assert diagnostic.text("es")[1] == "Transpón, no cambies la forma."


# --- issue 11: diagnostics that name what happened ----------------------------------------------

ISSUE_11 = (
    "tensors-reshape",
    "metrics",
    "autograd-q",
    "autograd-no-track",
    "autograd-accumulation",
    "autograd-custom-function",
)


def _mutant(slug: str, name: str) -> str:
    return (default_root() / slug / "mutants" / f"{name}.py").read_text()


def _diagnostics(report: dict) -> dict:
    """The first diagnostic of each failed check, by check name."""
    return {c["name"]: c["diagnostics"][0] for c in report["checks"] if c["diagnostics"]}


def _graded_plainly(harness, catalogue, slug: str, mutant: str, seed: int) -> dict:
    """Graded without the exercise's known wrong programs: the checks' own diagnostics."""
    info = catalogue[slug]
    job = replace(info.job(info.path / "mutants" / f"{mutant}.py", seed=seed), wrong_programs={})
    return _diagnostics(harness.report_for(job).to_dict())


def test_an_all_zero_gradient_says_it_was_cleared_not_scaled_by_zero():
    diagnostic = compare_grad(torch.zeros_like(EXPECTED), EXPECTED, "`a.grad`")
    assert diagnostic.code == "grad-mismatch" and diagnostic.details["hint"] == GRAD_CLEARED
    message, hint = diagnostic.text("en")
    assert "0 times" not in message and hint.startswith("`a.grad` is all zeros")
    assert "cleared" in hint and "before it was read or used" in hint
    assert diagnostic.text("es")[1].startswith("`a.grad` es todo ceros")


@pytest.mark.parametrize(
    "message, code, hint",
    [
        (
            "element 0 of tensors does not require grad and does not have a grad_fn",
            "detached-output",
            DETACHED_BACKWARD,
        ),
        (
            "a leaf Variable that requires grad is being used in an in-place operation.",
            "exception",
            LEAF_IN_PLACE,
        ),
        (
            "Trying to backward through the graph a second time (or directly access saved tensors after "
            "they have already been freed).",
            "graph-freed",
            None,
        ),
    ],
)
def test_autograd_exceptions_get_their_code_and_hint(message, code, hint):
    diagnostic = diagnose_exception(
        {
            "type": "RuntimeError",
            "message": message,
            "frames": [{"file": "submission.py", "line": 9}, {"file": "submission.py", "line": 5}],
        },
        "`q_grads`",
    )
    assert (diagnostic.code, diagnostic.details.get("hint")) == (code, hint)
    assert diagnostic.details["line"] == 5  # the student's last frame
    assert "optimizer" not in diagnostic.text("en")[1]


def test_a_cuda_out_of_memory_is_the_submissions_memory_limit():
    """What torch's allocator raises past `gpu_memory_mb` (gpu_memory.py), in torch's words:
    the submission's failure with its diagnostic, never a grader error."""
    diagnostic = diagnose_exception(
        {
            "type": "OutOfMemoryError",
            "message": "CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
            "capacity of 139.81 GiB of which 135.2 GiB is free. Including non-PyTorch memory, "
            "this process has 2.10 GiB memory in use. Of the allocated memory 2.00 GiB is "
            "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.",
            "frames": [{"file": "submission.py", "line": 3}],
        },
        "`f`",
    )
    assert (diagnostic.code, diagnostic.details["line"]) == ("memory-limit", 3)


def _raised(make) -> dict:
    """The exception PyTorch itself raises for `make`, as the student process reports it."""
    try:
        make()
    except Exception as exc:  # whatever torch raises is the point
        return {
            "type": type(exc).__name__,
            "message": str(exc),
            "frames": [{"file": "submission.py", "line": 4}],
        }
    raise AssertionError("torch raised nothing")


W = torch.ones(2, 3, requires_grad=True)


@pytest.mark.parametrize(
    "make, code, hint, en, es",
    [
        (lambda: (W * 2).numpy(), "detached-output", NUMPY_LEAVES_THE_GRAPH, "NumPy", "NumPy"),
        (lambda: (W * 2).item(), "exception", ONE_ELEMENT_ONLY, "one element", "un solo elemento"),
        (lambda: float(W * 2), "exception", ONE_ELEMENT_ONLY, "one element", "un solo elemento"),
        (
            lambda: torch.einsum("ij,jk->ik", W, torch.ones(3)),
            "exception",
            EINSUM_SUBSCRIPTS,
            "one letter per dimension",
            "una letra por dimensión",
        ),
        (
            lambda: torch.einsum("ij,jk->ik", W, torch.ones(4, 2)),
            "exception",
            EINSUM_SUBSCRIPTS,
            "one letter per dimension",
            "una letra por dimensión",
        ),
        (lambda: W.permute(0, 2, 1), "exception", PERMUTE_DIMENSIONS, "x.dim()", "x.dim()"),
        (lambda: W.view(4, 2), "exception", VIEW_SIZE, "x.numel()", "x.numel()"),
        (lambda: W.T.view(6), "exception", VIEW_STRIDES, "reshape", "reshape"),
        (
            lambda: W @ torch.ones(3, 2, dtype=torch.float64),
            "exception",
            SAME_DTYPE,
            "dtype=x.dtype",
            "dtype=x.dtype",
        ),
    ],
)
def test_pytorchs_own_errors_are_said_in_the_courses_terms(make, code, hint, en, es):
    """Raised by PyTorch itself, not written here: a new release's wording shows up as a
    failure. Leaving the graph is `detached-output`, whatever error it surfaced as."""
    diagnostic = diagnose_exception(_raised(make), "`f`")
    assert (diagnostic.code, diagnostic.details.get("hint")) == (code, hint)
    assert en in diagnostic.text("en")[1] and es in diagnostic.text("es")[1]
    assert diagnostic.details["line"] == 4


def test_a_student_who_computes_in_numpy_is_told_they_left_the_graph(grade):
    """A wrong program of a student's (not a mutant): Q in NumPy, then back into torch."""
    report = grade(
        "autograd-q",
        "import numpy as np\nimport torch\n\n\n"
        "def q_grads(a, b, v):\n"
        "    Q = torch.tensor(3 * a.numpy() ** 3 - b.numpy() ** 2)\n"
        "    Q.backward(gradient=v)\n    return a.grad, b.grad\n",
    )
    diagnostics = [d for check in report["checks"] for d in check["diagnostics"]]
    assert diagnostics and {d["code"] for d in diagnostics} == {"detached-output"}
    assert "left PyTorch for NumPy" in diagnostics[0]["hint"]
    assert "salió de PyTorch hacia NumPy" in diagnostics[0]["translations"]["es"]["hint"]
    assert diagnostics[0]["details"]["line"] == 6


def test_a_device_mismatch_is_said_in_the_courses_terms():
    message = (
        "Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:0 and cpu!"
    )  # PyTorch's words: no GPU here to make it raise them
    diagnostic = diagnose_exception({"type": "RuntimeError", "message": message}, "`f`")
    assert diagnostic.details["hint"] is SAME_DEVICE
    assert "device=x.device" in diagnostic.text("es")[1]


def test_an_output_built_from_item_is_detached_not_an_exception():
    diagnostic = diagnose_exception(
        {
            "type": "RuntimeError",
            "message": "element 0 of tensors does not require grad and does not have a grad_fn",
        },
        "`q_grads`",
    )
    message, hint = diagnostic.text("en")
    assert message == (
        "the tensor that `backward()` ran on in `q_grads` is not connected to the "
        "autograd graph (no grad_fn)."
    )
    assert "`.item()`" in hint and "tensor operations" in hint
    assert diagnostic.text("es")[0].startswith("el tensor sobre el que se ejecutó `backward()` en")


def test_spanish_says_in_situ_in_the_codes_and_the_exercises():
    texts = [t for texts in CATALOGUE.values() for t in texts[2:]] + [
        d["es"] for d in (GRAD_CLEARED, LEAF_IN_PLACE, DETACHED_BACKWARD, BACKWARD_ON)
    ]
    for slug in ISSUE_11:
        folder = default_root() / slug
        texts += [
            p.read_text()
            for p in (folder / "statement.es.md", folder / "checks.py", folder / "exercise.toml")
        ]
    assert not [t for t in texts if "en el sitio" in t]


def test_rebinding_w_says_the_caller_w_is_unchanged_not_zero_grad(grade):
    report = grade("autograd-no-track", _mutant("autograd-no-track", "rebinds_w"), seed=3)
    found = _diagnostics(report)
    assert set(found) == {"sgd-in-place", "sgd-clears-grad"}
    first = found["sgd-in-place"]
    assert first["code"] == "leaf-replaced" and first["details"]["wrong_program"] == "rebinds_w"
    assert "rebinds the local name `w`" in first["hint"]
    assert "caller's `w` is unchanged" in first["hint"]
    assert "torch.no_grad()" in first["hint"]
    assert found["sgd-clears-grad"]["message"].endswith(
        "most likely the same mistake as in “sgd_update_ changes w in place”, explained there."
    )
    assert not [d for d in found.values() if "optimizer" in d["message"] + d["hint"]]


def test_a_rebinding_is_explained_by_the_check_itself(harness, catalogue):
    first = _graded_plainly(harness, catalogue, "autograd-no-track", "rebinds_w", 4)["sgd-in-place"]
    assert first["code"] == "leaf-replaced" and "wrong_program" not in first["details"]
    assert first["message"] == (
        "`w` was rebound to `w - lr * w.grad`, a new tensor: the leaf "
        "tensor it named was not updated in place."
    )
    assert "only rebinds the local name `w`" in first["hint"] and "caller's `w`" in first["hint"]


def test_the_classic_autograd_q_mistakes_are_named(grade):
    found = _diagnostics(grade("autograd-q", _mutant("autograd-q", "sum_ignoring_v"), seed=1))
    assert found["grad-a"]["code"] == "grad-mismatch"
    assert found["grad-a"]["hint"].startswith("Your gradient is the one of `Q.sum()`")
    ones = _diagnostics(grade("autograd-q", _mutant("autograd-q", "ones_cotangent"), seed=1))
    assert ones["grad-a"]["details"]["wrong_program"] == "sum_ignoring_v"


@pytest.mark.parametrize(
    "slug, mutant, check, code, words",
    [
        ("autograd-q", "grads_zeroed_after_backward", "grad-a", "grad-mismatch", "all zeros"),
        (
            "autograd-no-track",
            "grad_zeroed_before_update",
            "sgd-in-place",
            "output-mismatch",
            "clears `w.grad` before the update uses it",
        ),
        (
            "autograd-no-track",
            "grad_none_before_update",
            "sgd-in-place",
            "exception",
            "its gradient was cleared (`w.grad.zero_()` or `w.grad = None`) before",
        ),
    ],
)
def test_a_gradient_cleared_before_it_is_used_is_said_so(grade, slug, mutant, check, code, words):
    diagnostic = _diagnostics(grade(slug, _mutant(slug, mutant), seed=2))[check]
    assert diagnostic["code"] == code and words in diagnostic["hint"]
    assert "times the expected" not in diagnostic["message"]
    assert "leaf" not in diagnostic["message"] + diagnostic["hint"]


@pytest.mark.parametrize(
    "slug, mutant, check, words",
    [
        (
            "autograd-q",
            "grads_zeroed_after_backward",
            "grad-a",
            "a.grad is all zeros. Most often the gradient was cleared",
        ),
        (
            "autograd-no-track",
            "grad_zeroed_before_update",
            "sgd-in-place",
            "`w` did not change: its gradient was cleared",
        ),
        (
            "autograd-no-track",
            "grad_not_cleared",
            "sgd-clears-grad",
            "clear it at the end of `sgd_update_`",
        ),
        (
            "autograd-accumulation",
            "zero_grad_before_step",
            "one-window",
            "`optimizer.zero_grad()` came before `optimizer.step()`",
        ),
    ],
)
def test_the_checks_own_hints_say_what_happened(harness, catalogue, slug, mutant, check, words):
    diagnostic = _graded_plainly(harness, catalogue, slug, mutant, 2)[check]
    assert words in diagnostic["hint"] and " 0 times" not in diagnostic["message"]
    assert slug == "autograd-accumulation" or "optimizer" not in diagnostic["hint"]


def test_an_output_built_with_item_is_reported_as_detached(grade):
    found = _diagnostics(grade("autograd-q", _mutant("autograd-q", "item_per_element"), seed=0))
    assert found["grad-a"]["code"] == "detached-output"
    assert "is not connected to the autograd graph" in found["grad-a"]["message"]
    assert found["grad-a"]["hint"].startswith("Your code leaves the graph here: line ")
    assert ".item()`: a Python number has no graph" in found["grad-a"]["hint"]


IN_PLACE = """import torch


def q_grads(a, b, v):
    e = a.exp()
    Q = 3 * a**3 - b**2 + 0 * e
    e += 1
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


def test_errors_inside_backward_name_the_line_that_made_the_tensor(grade):
    freed = _diagnostics(grade("autograd-q", _mutant("autograd-q", "backward_twice"), seed=0))
    assert freed["grad-a"]["code"] == "graph-freed"
    assert freed["grad-a"]["details"]["line"] == 5  # Q = 3 * a**3 - b**2, not a backward() call
    assert "optimizer" not in freed["grad-a"]["hint"]
    modified = _diagnostics(grade("autograd-q", IN_PLACE, seed=0))["grad-a"]
    assert modified["code"] == "inplace-modified"
    assert (modified["details"]["file"], modified["details"]["line"]) == ("submission.py", 5)


def test_a_new_optimizer_each_step_is_named_not_counted_as_zero_steps(grade):
    found = _diagnostics(
        grade(
            "autograd-accumulation",
            _mutant("autograd-accumulation", "new_optimizer_each_step"),
            seed=0,
        )
    )
    first = found["one-window"]
    assert first["code"] == "output-mismatch"
    assert first["message"] == (
        "the number of `step()` calls on the optimizer passed to "
        "`train_accumulated` is 0, expected 1."
    )
    assert first["hint"].startswith("You step an optimizer you create yourself")
    # not the known wrong program (another learning rate): the check's own hint says it; with the
    # given optimizer's learning rate the weights would be right, and only they are graded
    other_lr = _mutant("autograd-accumulation", "new_optimizer_each_step").replace(
        "lr=0.01", "lr=0.5"
    )
    first = _diagnostics(grade("autograd-accumulation", other_lr, seed=0))["one-window"]
    assert "another optimizer, created in your code" in first["hint"]


def test_a_float32_output_for_a_float64_input_says_both(grade):
    found = _diagnostics(
        grade(
            "autograd-custom-function",
            _mutant("autograd-custom-function", "forward_in_float32"),
            seed=0,
        )
    )
    assert found["forward-values"]["message"] == (
        "`silu(x)` for a float64 `x` has dtype torch.float32, expected torch.float64."
    )
    assert found["forward-values"]["translations"]["es"]["message"].startswith(
        "`silu(x)` para un `x` float64 tiene dtype torch.float32"
    )


@pytest.mark.parametrize("slug", ISSUE_11)
def test_each_exercise_has_five_mutants_and_known_wrong_programs(catalogue, slug):
    info = catalogue[slug]
    assert len(info.mutants) >= 5 and len(info.wrong_programs) >= 2


def test_a_place_the_student_process_makes_up_is_no_place():
    """The student process is the submission's: frames that are not a name and a line are
    dropped, so that no report printer or page breaks on them."""
    for frames, made_at in [
        ([{"file": ["cell 1"], "line": {"x": 1}}], {"file": 3, "line": True}),
        ("frames", "made_at"),
        ([None], None),
    ]:
        diagnostic = diagnose_exception(
            {
                "type": "RuntimeError",
                "message": "modified by an inplace operation",
                "frames": frames,
                "made_at": made_at,
            },
            "`f`",
        )
        assert (diagnostic.details["file"], diagnostic.details["line"]) == (None, None)
        assert diagnostic.text("en")[0]


def test_an_error_in_a_backward_the_check_calls_names_the_line_that_made_the_tensor(
    harness, tmp_path
):
    """The template exercise's gradient check calls backward() itself: the second look, in
    anomaly mode, names the student's line whose saved tensor was modified."""
    import shutil

    from server.core.catalogue import load_exercise_info

    folder = tmp_path / "scaled-square"
    shutil.copytree(default_root().parent / "server" / "exercise_template", folder)
    work = tmp_path / "work.py"
    work.write_text(
        "def scaled_square(x, c):\n"
        "    grown = x.exp()\n"  # line 2: exp saves its output
        "    out = c * x**2 + grown * 0\n"
        "    grown.mul_(1)\n"  # changes what exp saved
        "    return out\n"
    )
    report = harness.report_for(load_exercise_info(folder).job(work, seed=1)).to_dict()
    (modified,) = [d for c in report["checks"] for d in c["diagnostics"]]
    assert modified["code"] == "inplace-modified"
    assert (modified["details"]["file"], modified["details"]["line"]) == ("submission.py", 2)


def test_a_gradient_of_wrong_values_points_at_the_values_not_at_a_mistake_of_its_own(grade):
    """A student's wrong program: the convolution sums the first channel only. Its values are
    wrong, and so, because of them, are both gradients: those say so, and point at the values."""
    report = grade(
        "conv2d-einsum",
        """import torch


def conv2d(input, filter):
    kh, kw = filter.shape[-2:]
    windows = input[:, :1].unfold(2, kh, 1).unfold(3, kw, 1)
    return torch.einsum("bchwij,ocij->bohw", windows, filter[:, :1])
""",
        seed=3,
    )
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["values-fixed"]["diagnostics"][0]["code"] == "output-mismatch"
    values = checks["values-fixed"]["title"]
    for name, what in (("grad-input", "`input.grad`"), ("grad-filter", "`filter.grad`")):
        (gradient,) = checks[name]["diagnostics"]
        assert gradient["code"] == "grad-mismatch" and checks[name]["points"] == 0
        assert gradient["message"] == (
            f"{what} is wrong too, most likely because the values it "
            f"is the gradient of are wrong: see “{values}”."
        )
        assert gradient["hint"].startswith("Fix the values there first")
        spanish = gradient["translations"]["es"]
        assert (
            spanish["message"].startswith(f"{what} también es incorrecto")
            and "«" in spanish["message"]
        )
        assert "wrong_program" not in gradient["details"]


@pytest.mark.parametrize(
    "source, line, code, en, es",
    [
        (
            """import torch


def q_grads(a, b, v):
    with torch.no_grad():
        Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
""",
            5,
            "with torch.no_grad()",
            "nothing computed under it is recorded in the graph",
            "nada de lo que se calcula dentro queda en el grafo",
        ),
        (
            """import torch


def q_of(a, b):
    return (3 * a**3 - b**2).detach()


def q_grads(a, b, v):
    Q = q_of(a, b)
    Q.backward(gradient=v)
    return a.grad, b.grad
""",
            5,
            "(3 * a ** 3 - b ** 2).detach()",
            "it returns a tensor cut off from the graph",
            "devuelve un tensor separado del grafo",
        ),
    ],
)
def test_a_detached_output_names_the_way_out_the_source_takes(grade, source, line, code, en, es):
    """Students' wrong programs: the output computed under torch.no_grad(), or by a helper that
    detaches it. The grader reads the source and says which way out it took, and where."""
    report = grade("autograd-q", source)
    first = report["checks"][0]["diagnostics"][0]
    assert first["code"] == "detached-output" and report["score"] == 0
    assert first["hint"].startswith(f"Your code leaves the graph here: line {line}, `{code}`: {en}")
    assert first["translations"]["es"]["hint"].startswith(
        f"Tu código sale del grafo aquí: línea {line}, `{code}`: {es}"
    )


def test_a_detached_output_with_no_way_out_in_the_source_lists_them_all_no_grad_included(grade):
    report = grade(
        "autograd-q",
        """import torch


def q_grads(a, b, v):
    Q = a.new_tensor(3 * a**3 - b**2)
    Q.backward(gradient=v)
    return a.grad, b.grad
""",
    )
    first = report["checks"][0]["diagnostics"][0]
    assert first["code"] == "detached-output" and "`torch.no_grad()`" in first["hint"]
    assert "`torch.no_grad()`" in first["translations"]["es"]["hint"]


def test_one_backward_per_window_gets_full_marks_and_advice_not_graded(grade):
    """The statement allows a single backward() on a window's summed losses: full marks, and a
    note, in both languages, that it keeps every micro-batch's graph in memory."""
    report = grade("autograd-accumulation", ONE_BACKWARD_PER_WINDOW, seed=2)
    assert report["score"] == report["max_score"]
    (advice,) = [n for n in report["notes"] if n["kind"] == "advice"]
    assert advice["name"] == "one-backward-per-micro-batch"
    assert advice["message"].startswith("Your code calls `backward()` once per window")
    assert "graphs of all the window's micro-batches are in memory at once" in advice["message"]
    assert "están a la vez en memoria" in advice["translations"]["es"]["message"]
    reference = (default_root() / "autograd-accumulation" / "reference.py").read_text()
    assert [
        n
        for n in grade("autograd-accumulation", reference, seed=2)["notes"]
        if n["kind"] == "advice"
    ] == []


E = torch.arange(1.0, 17.0, dtype=torch.float64).reshape(4, 4).sin() + 2


@pytest.mark.parametrize(
    "actual, en, es",
    [
        (2.5 * E, "Your values are 2.5 times the expected ones", "Tus valores son 2.5 veces"),
        (-E, "with the opposite sign", "con el signo contrario"),
        (E + 0.25, "by the same amount, 0.25, everywhere", "en la misma cantidad, 0.25"),
        (E.T, "with dimensions 0 and 1 swapped", "las dimensiones 0 y 1 intercambiadas"),
        (
            torch.cat([E[:1], E[:-1]]),
            "shifted by one position along dimension 0",
            "a lo largo de la dimensión 0",
        ),
        (
            torch.cat([E[:, 1:], E[:, :1]], dim=1),
            "shifted by one position along dimension 1",
            "dimensión 1",
        ),
        (E.reshape(-1).flip(0).reshape(4, 4), "in another order", "en otro orden"),
    ],
)
def test_wrong_values_are_said_by_what_they_show(actual, en, es):
    """Where nothing names the mistake, the relation the values bear to the expected ones as a
    whole: a fact the grader computed about them."""
    for found in (compare_values(actual, E, "x"), compare_grad(actual, E, "x.grad")):
        if found.code in ("grad-scaled", "grad-sign-flipped"):
            continue  # gradients have codes of their own for these
        assert en in found.text("en")[1] and es in found.text("es")[1], found.text("en")


def test_values_with_no_relation_and_a_checks_own_hint_keep_their_words():
    noise = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert "shows" not in compare_values(noise, E, "x").details
    assert compare_values(noise, E, "x").text("en")[1] == CATALOGUE["output-mismatch"][1]
    own = Diagnostic(
        "output-mismatch",
        dict(compare_values(2 * E, E, "x").details, hint={"en": "Mine.", "es": "Mía."}),
    )
    assert own.text("en")[1] == "Mine." and own.text("es")[1] == "Mía."
    assert "shows" not in compare_values(torch.tensor([3.0]), torch.tensor([1.0]), "x").details
    # one number: its sign alone says something
    assert (
        compare_values(torch.tensor([-3.0]), torch.tensor([3.0]), "x")
        .text("en")[1]
        .startswith("Your value is the expected one with the opposite sign")
    )


def test_accumulation_seen_as_a_pattern_names_no_factor():
    """Running sums of a Jacobian's rows are no multiple of it: the message names no factor
    (it said "0.5 times the expected gradient", a least-squares fit of no meaning)."""
    found = Diagnostic("grad-accumulated", {"what": "`J`"})
    assert found.text("en")[0] == "`J` adds up the gradients of several `backward()` calls."
    assert found.text("es")[0] == "`J` suma los gradientes de varias llamadas a `backward()`."
    # seen as a factor, it is worded as what the factor would take, not as what happened
    scaled = Diagnostic("grad-accumulated", {"what": "`g`", "factor": 2}).text("en")
    assert (
        scaled[0] == "`g` is 2 times the expected gradient: what 2 backward passes added up "
        "would give."
    )
    assert "if it runs once, a constant factor in the formula is off" in scaled[1]
