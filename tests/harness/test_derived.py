"""Wrong programs derived from a reference (worker/harness/derived.py): the mutations a student
makes, each in one place, with words that quote the change and name a student's line only
where the source shows the same construct."""

import ast

from server.core.catalogue import default_root, load_exercise_info
from worker.harness.derived import derive

REFERENCE = """\
import torch


def accuracy(outputs, labels):
    predicted = outputs.argmax(dim=1)
    return (predicted == labels).sum().item() / labels.numel()


def mae(output, target):
    return (output - target).abs().mean().item()


def train_step(model, data, labels, optimizer):
    optimizer.zero_grad()
    loss = (model(data) - labels).pow(2).sum()
    loss = loss / len(data)
    loss.backward()
    optimizer.step()
    return loss.item()


def window(x, k):
    return x[:, 1:-1].unfold(1, k, 1).permute(0, 2, 1)


def update(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    for i in range(len(w) - 1):
        w[i] = torch.softmax(w, 0)[i]
"""


def changes() -> dict[str, str]:
    return {
        p.words(None, False)["en"].split("solution gives ", 1)[1]: p.source
        for p in derive(REFERENCE)
    }


def test_each_kind_of_mistake_is_derived_once_in_one_place():
    said = changes()
    for change in [
        "with `outputs.argmax(dim=0)` in place of `outputs.argmax(dim=1)`.",
        "with `outputs.argmax()` in place of `outputs.argmax(dim=1)`.",
        "with `(predicted == labels).mean()` in place of `(predicted == labels).sum()`.",
        "with `(output - target).mean().abs()` in place of `(output - target).abs().mean()`.",
        "with `output - target` in place of `(output - target).abs()`.",
        "with `target - output` in place of `output - target`.",
        "without `optimizer.zero_grad()`.",
        "with `optimizer.zero_grad()` moved after `loss.backward()`.",
        "with `loss = loss / len(data)` moved after `loss.backward()`.",
        "with `x[:, 2:-1]` in place of `x[:, 1:-1]`.",
        "with `x[:, 1:-2]` in place of `x[:, 1:-1]`.",
        "with `x[:, 1:-1].unfold(1, k, k)` in place of `x[:, 1:-1].unfold(1, k, 1)`.",
        "with `x[:, 1:-1].unfold(1, k, 1).permute(2, 0, 1)` in place of "
        "`x[:, 1:-1].unfold(1, k, 1).permute(0, 2, 1)`.",
        "without `with torch.no_grad():`.",
        "with `w = w - lr * w.grad` in place of `w -= lr * w.grad`.",
        "with `range(len(w) - 1 + 1)` in place of `range(len(w) - 1)`.",
        "with `torch.softmax(w, 1)` in place of `torch.softmax(w, 0)`.",
    ]:
        assert change in said, change
    sources = list(said.values())
    assert len(sources) == len(set(sources)) and ast.unparse(ast.parse(REFERENCE)) not in sources
    for source in sources:
        changed = [
            a
            for a, b in zip(ast.parse(source).body, ast.parse(REFERENCE).body)
            if ast.dump(a) != ast.dump(b)
        ]
        assert len(changed) == 1  # one function changed, the others as they were
        compile(source, "derived", "exec")


def program(change: str):
    return next(p for p in derive(REFERENCE) if change in p.words(None, False)["en"])


def test_the_words_name_the_students_line_only_where_the_same_construct_stands():
    derived = program("`outputs.argmax(dim=0)` in place of")
    student = (
        "def accuracy(scores, y):\n    import torch\n\n    best = torch.argmax(scores, dim=0)\n"
        "    return (best == y).float().mean().item()\n"
    )
    place = derived.place_in([("submission.py", student)])
    assert place == ("submission.py", 4, "torch.argmax(scores, dim=0)")
    words = derived.words(place, notebook=False)
    assert words["en"].endswith("Look at line 4: `torch.argmax(scores, dim=0)`.")
    assert words["es"].startswith(
        "Tus valores son los que da la solución de referencia con "
        "`outputs.argmax(dim=0)` en lugar de `outputs.argmax(dim=1)`."
    )
    assert words["es"].endswith("Mira la línea 4: `torch.argmax(scores, dim=0)`.")
    # the same values from code that has no such construct: the values are said, no line
    other = "def accuracy(scores, y):\n    return (scores.max(0)[1] == y).float().mean().item()\n"
    assert derived.place_in([("submission.py", other)]) is None
    assert "Look at" not in derived.words(None, notebook=False)["en"]


def test_a_notebook_line_is_named_with_its_cell():
    derived = program("`(output - target).mean().abs()` in place of")
    cells = [
        ("cell 1", "import torch"),
        ("cell 3", "def mae(o, t):\n    d = o - t\n    return d.mean().abs().item()\n"),
    ]
    place = derived.place_in(cells)
    assert place == ("cell 3", 3, "d.mean().abs()")
    assert "Mira la celda 3, línea 3" in derived.words(place, notebook=True)["es"]


def test_a_long_construct_is_quoted_cut():
    reference = (
        "def f(x):\n    return x.reshape(-1, x.shape[-1]).sum(dim=1) + "
        "x.reshape(-1, x.shape[-1]).mean(dim=0) * 2 / 3\n"
    )
    words = [p.words(None, False)["en"] for p in derive(reference)]
    assert all(len(part) <= 62 for w in words for part in w.split("`")[1::2])
    assert any("…" in w for w in words)


MAE_OTHER_WAY = """import torch


def accuracy(outputs, labels):
    return (outputs.argmax(dim=1) == labels).float().mean().item()


def mae(output, target):
    diff = output - target
    return diff.mean().abs().item()
"""


def test_a_student_whose_values_are_a_derived_programs_is_told_the_change_and_the_line(
    harness, tmp_path
):
    """No author wrote this mistake down (metrics has no mutant for it): the grader derives it."""
    info = load_exercise_info(default_root() / "metrics")
    student = tmp_path / "mine.py"
    student.write_text(MAE_OTHER_WAY)
    report = harness.report_for(info.job(student, seed=7)).to_dict()
    (named,) = [
        d
        for c in report["checks"]
        for d in c["diagnostics"]
        if d["details"].get("wrong_program", "").startswith("derived:mae:")
    ]
    assert named["code"] == "output-mismatch" and named["details"]["line"] == 10
    assert named["hint"] == (
        "Your values are the ones the reference solution gives with "
        "`(output - target).mean().abs()` in place of "
        "`(output - target).abs().mean()`. Look at line 10: "
        "`diff.mean().abs()`."
    )
    assert named["translations"]["es"]["hint"].endswith("Mira la línea 10: `diff.mean().abs()`.")
    assert report["score"] < report["max_score"]


STEP = """import torch


def train_step(model, data, labels, optimizer) -> float:
    optimizer.zero_grad()
    prediction = model(data)
    loss = {loss}
    loss.backward()
    optimizer.step()
    return {returned}
"""


def derived_named(report: dict) -> list[dict]:
    return [
        d
        for c in report["checks"]
        for d in c["diagnostics"]
        if d["details"].get("wrong_program", "").startswith("derived:")
    ]


def test_a_derived_program_is_named_only_where_the_checks_the_code_passed_agree(harness, tmp_path):
    """`labels - prediction` flips the loss and the gradients: a file that flips only what it
    returns (its gradients right) matches it on the loss alone, and is not told line 7."""
    info = load_exercise_info(default_root() / "training-step")
    swapped, returned = tmp_path / "swapped.py", tmp_path / "returned.py"
    swapped.write_text(STEP.format(loss="(labels - prediction).sum()", returned="loss.item()"))
    returned.write_text(STEP.format(loss="-(labels - prediction).sum()", returned="-loss.item()"))
    (named,) = {
        d["hint"] for d in derived_named(harness.report_for(info.job(swapped, seed=5)).to_dict())
    }
    assert (
        named.endswith("Look at line 7: `(labels - prediction).sum()`.")
        or "`labels - prediction` in place of `prediction - labels`" in named
    )
    report = harness.report_for(info.job(returned, seed=5)).to_dict()
    assert report["score"] < report["max_score"] and derived_named(report) == []


def test_a_huge_file_gets_no_line_rather_than_the_graders_time():
    """Each construct compared costs a copy of its tree: past MOST_COMPARED of them (a megabyte
    of arithmetic), no line is named."""
    from worker.harness.derived import MOST_COMPARED

    derived = program("`target - output` in place of")
    padding = "".join(f"    a{i} = output + {i}\n" for i in range(MOST_COMPARED + 1))
    late = f"def mae(output, target):\n{padding}    return (target - output).abs().mean()\n"
    assert derived.place_in([("submission.py", late)]) is None
    early = "def mae(output, target):\n    return (target - output).abs().mean()\n"
    assert derived.place_in([("submission.py", early)])[1] == 2


def test_the_self_check_grades_the_derived_programs(harness):
    """`hpcgrade exercise check --derived`: each derived program graded on each seed, none at
    full marks on one seed and not another; these two are named on every seed."""
    from worker.cli.self_check import derived_check

    tally = derived_check(
        harness, load_exercise_info(default_root() / "tensors-channels-last"), (3, 11)
    )
    assert (tally.programs, tally.equivalent, tally.problems) == (2, [], [])
    assert len(tally.told) == 2
