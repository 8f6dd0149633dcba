"""Where a submission's function leaves the autograd graph, read from its source by the grader.

When an output turns out detached (`detached-output`), the grader's own reading of the source
says which of the ways out it found in the functions involved, with their lines, instead of
listing them all: a block under `torch.no_grad()`, `.detach()`, `.data`, `.item()`, NumPy,
`torch.tensor(...)`. Words only: a point never rests on this reading.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable

from worker.harness.source_rules import parsed

NO_GRAD_BLOCKS = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})
PYTHON_NUMBERS = frozenset({"item", "tolist"})
NUMPY_MODULES = frozenset({"np", "numpy"})
# what each way out does, said after the code that takes it
WHY = {
    "no-grad": {
        "en": "nothing computed under it is recorded in the graph",
        "es": "nada de lo que se calcula dentro queda en el grafo",
    },
    "detach": {
        "en": "it returns a tensor cut off from the graph",
        "es": "devuelve un tensor separado del grafo",
    },
    "data": {
        "en": "it is the tensor's values without their graph",
        "es": "son los valores del tensor sin su grafo",
    },
    "number": {"en": "a Python number has no graph", "es": "un número de Python no tiene grafo"},
    "numpy": {"en": "NumPy arrays have no graph", "es": "los arrays de NumPy no tienen grafo"},
    "new-tensor": {
        "en": "it copies the values into a new tensor with no graph",
        "es": "copia los valores en un tensor nuevo sin grafo",
    },
}
KINDS = tuple(WHY)  # in that order, the way out named when a line takes several
# each way out by what it is, for words that name no one's line (the course's analytics)
WAYS = {
    "no-grad": {"en": "a block under `torch.no_grad()`", "es": "un bloque bajo `torch.no_grad()`"},
    "detach": {"en": "`.detach()`", "es": "`.detach()`"},
    "data": {"en": "`.data`", "es": "`.data`"},
    "number": {"en": "a Python number (`.item()`)", "es": "un número de Python (`.item()`)"},
    "numpy": {"en": "NumPy", "es": "NumPy"},
    "new-tensor": {"en": "`torch.tensor(...)`", "es": "`torch.tensor(...)`"},
}
LINE = {"en": "line", "es": "línea"}
SHOWN = 3  # ways out named in one hint


@dataclass(frozen=True)
class GraphExit:
    kind: str
    code: str  # as written, shortened
    cell: str
    line: int


def graph_exits(cells: Iterable[tuple[str, str]], functions: Iterable[str]) -> list[GraphExit]:
    """The ways out of the graph in the named functions and in the functions of the submission
    they call by name, in the order of the source."""
    trees = parsed(cells)
    defined = {
        node.name: (label, node)
        for label, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    todo, seen, found = [f for f in functions if f in defined], set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        label, function = defined[name]
        for decorator in function.decorator_list:
            found += (
                [GraphExit("no-grad", f"@{_code(decorator)}", label, decorator.lineno)]
                if _no_grad(decorator)
                else []
            )
        for node in ast.walk(function):
            exit_kind = _exit(node)
            if exit_kind:
                found.append(GraphExit(exit_kind, _code(node), label, node.lineno))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in defined
            ):
                todo.append(node.func.id)
    # one way out per line, the one that says most: `torch.tensor([x.item() …])` is `.item()`
    by_line: dict[tuple[str, int], GraphExit] = {}
    for exit in found:
        kept = by_line.get((exit.cell, exit.line))
        if kept is None or KINDS.index(exit.kind) < KINDS.index(kept.kind):
            by_line[exit.cell, exit.line] = exit
    return sorted(by_line.values(), key=lambda e: (e.cell, e.line))


def _no_grad(node: ast.AST) -> bool:
    call = node if isinstance(node, ast.Call) else None
    name = _attribute(call.func if call else node)
    if name == "set_grad_enabled":
        return bool(
            call
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and call.args[0].value is False
        )
    return name in NO_GRAD_BLOCKS


def _exit(node: ast.AST) -> str | None:
    if isinstance(node, ast.With):
        return "no-grad" if any(_no_grad(item.context_expr) for item in node.items) else None
    if isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.ctx, ast.Load):
        return "data"
    if not isinstance(node, ast.Call):
        return None
    name, owner = (
        _attribute(node.func),
        node.func.value if isinstance(node.func, ast.Attribute) else None,
    )
    if name in ("detach", "detach_"):
        return "detach"
    if name in PYTHON_NUMBERS or (isinstance(node.func, ast.Name) and name == "float"):
        return "number"
    if name == "numpy" or (isinstance(owner, ast.Name) and owner.id in NUMPY_MODULES):
        return "numpy"
    if name == "tensor" and isinstance(owner, ast.Name) and owner.id == "torch":
        return "new-tensor"
    return None


def _attribute(node: ast.AST) -> str | None:
    return (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else None
    )


def _code(node: ast.AST) -> str:
    """The way out as written, its arguments elided: `with torch.no_grad()`, `x.detach()`,
    `torch.tensor(…)`."""
    if isinstance(node, ast.With):
        text = "with " + ", ".join(_code(item.context_expr) for item in node.items)
    elif isinstance(node, ast.Call):
        text = f"{ast.unparse(node.func)}({'…' if node.args or node.keywords else ''})"
        if _attribute(node.func) == "set_grad_enabled":
            text = ast.unparse(node)
    else:
        text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "…"


def exits_hint(exits: list[GraphExit], notebook: bool) -> dict[str, str]:
    """The hint of a detached output whose ways out the reading found: where, and what each does."""
    hint = {}
    for lang, intro, outro in (
        (
            "en",
            "Your code leaves the graph here: ",
            ". Keep the values you differentiate in tensor operations, outside such blocks.",
        ),
        (
            "es",
            "Tu código sale del grafo aquí: ",
            ". Calcula los valores que hay que derivar con operaciones de tensores, fuera de "
            "esos bloques.",
        ),
    ):
        places = [
            f"{exit.cell + ', ' if notebook else ''}{LINE[lang]} {exit.line}, "
            f"`{exit.code}`: {WHY[exit.kind][lang]}"
            for exit in exits[:SHOWN]
        ]
        hint[lang] = intro + "; ".join(places) + outro
    return hint


def ways_out_words(kinds: Iterable[str]) -> dict[str, str]:
    """A detached output's mistake in words of no one's line: the kinds of way out its hint
    named (a diagnostic's `left_at`), each with what it does."""
    named = set(kinds)
    known = [kind for kind in KINDS if kind in named]
    return {
        lang: intro + "; ".join(f"{WAYS[kind][lang]}: {WHY[kind][lang]}" for kind in known) + outro
        for lang, intro, outro in (
            ("en", "The code leaves the graph through ", "."),
            ("es", "El código sale del grafo por ", "."),
        )
    }
