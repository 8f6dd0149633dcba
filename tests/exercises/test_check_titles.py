"""Each check runs what its title says: a call its title names (`y.sum()`, `backward()`,
`unpack_hook(pack_hook(t))`) is one the check makes, or a helper of its checks.py that it calls
makes, or one of the student's functions it calls, or the reference's (`chunk(k)`: the expected
values are what the reference computes with it) (issue: a check titled "y.sum().backward()"
ran no such call, and a backward that fails there scored full marks)."""

import re
import types

import pytest

from server.core.catalogue import default_root
from worker.harness.grader import load_exercise
from worker.harness.jobs import HIDDEN_CHECKS, VISIBLE_CHECKS

CALLED = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\(")


def names_in(code: types.CodeType) -> set[str]:
    """The names and strings a function's code refers to, its nested functions' too."""
    found = set(code.co_names) | set(code.co_varnames) | set(code.co_freevars)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            found |= names_in(constant)
        elif isinstance(constant, str):
            found |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", constant))
    return found


def reached(function: types.FunctionType, module: dict, depth: int = 3) -> set[str]:
    """What a check refers to, and what the helpers of its own module that it calls refer to."""
    found = names_in(function.__code__)
    if depth:
        for name in list(found):
            helper = module.get(name)
            if isinstance(helper, types.FunctionType) and helper is not function:
                found |= reached(helper, module, depth - 1)
    return found


@pytest.mark.parametrize("checks", [HIDDEN_CHECKS, VISIBLE_CHECKS])
@pytest.mark.parametrize("slug", sorted(p.parent.name for p in default_root().glob("*/checks.py")))
def test_each_call_a_title_names_is_one_its_check_makes(slug, checks):
    exercise = load_exercise(slug, str(default_root() / slug), checks)
    for spec in exercise.checks:
        title = spec.title["en"]
        called = {name.rsplit(".", 1)[-1] for name in CALLED.findall(title)}
        made = reached(spec.function, spec.function.__globals__) | set(spec.uses)
        for name in spec.uses if exercise.reference else ():
            solution = getattr(exercise.reference, name)
            made |= (
                reached(solution, solution.__globals__)
                if isinstance(solution, types.FunctionType)
                else set(dir(solution))
            )
        assert called <= made, f"{slug}: “{title}” names {sorted(called - made)}, not called"
