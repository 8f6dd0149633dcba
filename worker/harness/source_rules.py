"""The grader's own reading of a submission's source, for the checks that rest on it.

Everything the student's process reports about itself (flags, graph names, class names) is the
submission's to rewrite. Its source is not: the grader holds the file it was given, and reads it
here with `ast`, without running anything. A check may rest on this reading where no value can
show the property (which built-ins computed a result, whether a Function of one's own is used).

The reading is conservative where the source could hide what it does: a lookup by a computed
name (`getattr(F, "conv" + "2d")`), `__import__`, `importlib`, `eval`/`exec`/`compile`,
`globals()`/`vars()`, `__dict__`, `__builtins__`, `sys.modules`, is an *obfuscated lookup*, which
fails a check that rests on the source: honest code has no need of them.

Cells that do not parse are skipped: they never run either.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

# calls whose second argument names an attribute
NAMED_LOOKUPS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# names whose mere use lets code reach what the source does not name
DYNAMIC_NAMES = frozenset({"__import__", "eval", "exec", "compile", "globals", "vars",
                           "__builtins__", "__loader__", "__spec__"})
DYNAMIC_ATTRIBUTES = frozenset({"__dict__", "__builtins__", "__globals__", "__getattribute__",
                                "__subclasses__", "__code__", "__closure__", "__import__",
                                "f_globals", "f_locals", "f_builtins"})
# `submission` is the student's own module as its process names it: through it, code can rebind
# what the file defines
DYNAMIC_MODULES = frozenset({"importlib", "builtins", "ctypes", "submission"})
# operator's lookups by name, when imported from it directly
NAME_BUILDERS = frozenset({"attrgetter", "methodcaller", "itemgetter"})


@dataclass(frozen=True)
class Finding:
    """What the reading found: `kind` is "forbidden" (a name the check refuses), "own-function"
    (a torch.autograd.Function subclass) or "obfuscated" (a lookup the reading cannot follow)."""

    kind: str
    name: str
    cell: str
    line: int

    def where(self) -> str:
        return f"line {self.line}" if self.cell == "submission.py" else f"{self.cell}, line {self.line}"


def parsed(cells: Iterable[tuple[str, str]]) -> list[tuple[str, ast.Module]]:
    """The cells that parse, in order, with their labels."""
    trees = []
    for label, code in cells:
        try:
            trees.append((label, ast.parse(code, filename=label)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return trees


def _walk(cells: Iterable[tuple[str, str]]) -> Iterator[tuple[str, ast.AST]]:
    for label, tree in parsed(cells):
        for node in ast.walk(tree):
            yield label, node


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - only words for a message
        return "?"


def _called(node: ast.AST) -> str | None:
    """The name a call calls: `getattr` for `getattr(...)`, `attrgetter` for
    `operator.attrgetter(...)`; None for anything else."""
    if not isinstance(node, ast.Call):
        return None
    return node.func.id if isinstance(node.func, ast.Name) else \
        node.func.attr if isinstance(node.func, ast.Attribute) else None


def obfuscated_lookups(cells: Iterable[tuple[str, str]]) -> list[Finding]:
    """Every place the source reaches something by a name it does not write out."""
    found = []
    for label, node in _walk(cells):
        line = getattr(node, "lineno", 0)
        called = _called(node)
        if called in NAMED_LOOKUPS and not (
                len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            found.append(Finding("obfuscated", f"`{called}()` with a computed name", label, line))
        elif called in NAME_BUILDERS and not all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
            found.append(Finding("obfuscated", f"`{called}()` with a computed name", label, line))
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES:
            found.append(Finding("obfuscated", f"`{node.id}`", label, line))
        elif isinstance(node, ast.Attribute) and (
                node.attr in DYNAMIC_ATTRIBUTES
                or node.attr == "modules" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            found.append(Finding("obfuscated", f"`{_dotted(node)}`", label, line))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in DYNAMIC_MODULES:
                    found.append(Finding("obfuscated", f"`import {alias.name}`", label, line))
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in DYNAMIC_MODULES:
            found.append(Finding("obfuscated", f"`from {node.module} import …`", label, line))
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(
                alias.name == "modules" for alias in node.names):
            found.append(Finding("obfuscated", "`from sys import modules`", label, line))
    return found


def _defined(cells: Iterable[tuple[str, str]]) -> set[str]:
    """The names the submission defines itself with `def` or `class`, at any level."""
    return {node.name for _, node in _walk(cells)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def forbidden_uses(cells: Iterable[tuple[str, str]], forbidden: Callable[[str], bool]) -> list[Finding]:
    """Every mention of a name `forbidden` refuses: an attribute (`F.conv2d`, `nn.Conv2d`,
    `torch.ops.aten.convolution`), an import of it, a bare name the submission does not define
    itself (one a star import brought), or a string that is exactly such a name and not one the
    submission defines (`getattr(F, "conv2d")`, not `__all__ = ["conv2d"]`)."""
    cells = list(cells)
    own = _defined(cells)
    nodes = list(_walk(cells))  # one parse: the nodes below are these
    # names written into a lookup (`getattr(F, "conv2d")`, `attrgetter("conv2d")`): refused even
    # where the submission defines a function of that name
    looked_up = {id(arg) for _, node in nodes if isinstance(node, ast.Call)
                 and _called(node) in NAMED_LOOKUPS | NAME_BUILDERS
                 for arg in node.args if isinstance(arg, ast.Constant)}
    found = []
    for label, node in nodes:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and forbidden(node.attr):
            found.append(Finding("forbidden", f"`{_dotted(node)}`", label, line))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if forbidden(alias.name):
                    found.append(Finding("forbidden", f"`from {node.module} import {alias.name}`",
                                         label, line))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(forbidden(part) for part in alias.name.split(".")):
                    found.append(Finding("forbidden", f"`import {alias.name}`", label, line))
        elif isinstance(node, ast.Name) and node.id not in own and forbidden(node.id):
            found.append(Finding("forbidden", f"`{node.id}`", label, line))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.isidentifier() and forbidden(node.value) \
                and (node.value not in own or id(node) in looked_up):
            found.append(Finding("forbidden", repr(node.value), label, line))
    return found


def _is_function_base(base: ast.AST) -> bool:
    """`torch.autograd.Function`, `autograd.Function`, `Function` (as imported)."""
    name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(
        base, ast.Name) else None
    return name in ("Function", "InplaceFunction")


def own_functions(cells: Iterable[tuple[str, str]]) -> list[Finding]:
    """Every class the submission derives from `torch.autograd.Function`."""
    return [Finding("own-function", f"`class {node.name}`", label, node.lineno)
            for label, node in _walk(cells)
            if isinstance(node, ast.ClassDef) and any(_is_function_base(b) for b in node.bases)]


def _module_bindings(cells: Iterable[tuple[str, str]], name: str) -> list[ast.AST]:
    """The statements at the top level of the cells (in order) that bind `name`."""
    found = []
    for _, tree in parsed(cells):
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if statement.name == name:
                    found.append(statement)
                continue
            for node in ast.walk(statement):
                bound = (isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))
                         and node.id == name) or (
                    isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                        (alias.asname or alias.name.split(".")[0]) == name for alias in node.names)) \
                    or (isinstance(node, ast.Global) and name in node.names)
                if bound:
                    found.append(statement)
                    break
    return found


def _changed_elsewhere(cells: list[tuple[str, str]], name: str) -> bool:
    """Whether code may rebind `name`, or change its attributes, other than by its definition:
    `global name` in a function, `name.attr = …`, `del name.attr`, `setattr(name, …)`."""
    for _, node in _walk(cells):
        if isinstance(node, ast.Global) and name in node.names:
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and isinstance(node.value, ast.Name) and node.value.id == name:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("setattr", "delattr") and node.args \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == name:
            return True
    return False


def _function_class(cells: list[tuple[str, str]], name: str) -> ast.ClassDef | None:
    """The class `name` as the file leaves it: a Function subclass with forward and backward,
    not decorated (a decorator may return anything) nor changed elsewhere."""
    bindings = _module_bindings(cells, name)
    last = bindings[-1] if bindings else None
    if not isinstance(last, ast.ClassDef) or last.decorator_list or \
            _changed_elsewhere(cells, name) or not any(_is_function_base(b) for b in last.bases):
        return None
    methods = {s.name for s in last.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return last if {"forward", "backward"} <= methods else None


@dataclass(frozen=True)
class Applied:
    """How `function` uses a Function of the submission's own, as read in the source."""

    applied: bool  # `function(x)` calls `C.apply(x)` on its own argument (or is `C.apply`)
    to_expression: bool  # it calls `C.apply(...)`, but on something else than its argument
    returned: str | None  # what `function` returns, as written (for a message)


def applies_own_function(cells: Iterable[tuple[str, str]], function: str) -> Applied:
    """Whether `function`, as the file leaves it bound, applies a torch.autograd.Function of
    the submission's own (a class with forward and backward) to its first argument, unchanged:
    `def silu(x): return SiLU.apply(x)` or `silu = SiLU.apply`. A call that runs but whose
    result is not returned is counted too: it earns nothing a correct call would not."""
    cells = list(cells)
    bindings = _module_bindings(cells, function)
    last = bindings[-1] if bindings else None
    if last is None or _changed_elsewhere(cells, function):
        return Applied(False, False, None)
    if isinstance(last, ast.Assign) and len(last.targets) == 1 and \
            isinstance(last.targets[0], ast.Name):
        value = last.value
        ok = isinstance(value, ast.Attribute) and value.attr == "apply" and isinstance(
            value.value, ast.Name) and _function_class(cells, value.value.id) is not None
        return Applied(ok, False, _dotted(value))
    if not isinstance(last, ast.FunctionDef) or not last.args.args or last.decorator_list:
        return Applied(False, False, None)
    argument = last.args.args[0].arg
    rebound = any(isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))
                  and node.id == argument for statement in last.body
                  for node in ast.walk(statement))
    applied = to_expression = False
    for statement in last.body:
        for node in ast.walk(statement):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "apply" and isinstance(node.func.value, ast.Name)
                    and _function_class(cells, node.func.value.id) is not None):
                continue
            direct = (len(node.args) == 1 and not node.keywords
                      and isinstance(node.args[0], ast.Name) and node.args[0].id == argument)
            if direct and not rebound:
                applied = True
            else:
                to_expression = True
    returns = [node.value for statement in last.body for node in ast.walk(statement)
               if isinstance(node, ast.Return) and node.value is not None]
    return Applied(applied, to_expression and not applied,
                   _dotted(returns[-1]) if returns else None)
