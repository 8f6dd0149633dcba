"""Wrong programs derived from an exercise's reference by PyTorch-aware mutations.

The authors of an exercise write down the mistakes they foresee (mutants/ with `says`); the
grader derives many more itself. Each derived program is the reference with one change a student
makes: a reduction's dimension, `keepdim` dropped, `sum` for `mean`, a permutation's order, a
transpose left out, a slice, index or range bound off by one, a cast to float32 or to an integer
type, an intermediate detached, `zero_grad()` left out or moved after `backward()`, a loss
divided after `backward()`, a division, factor, offset, absolute value or sign left out.

When a check fails, the second look runs it again with each derived program standing in for the
reference; the first whose values the student's code gives is named: what the reference does
and what the student's values show instead, both as code. That is a fact the grader computed
about values. Where the same construct stands in the student's source, its line is named too (a
fact the grader read there); nothing is said of a line the source does not show.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from worker.harness.source_rules import called_name, parsed

# how a derived program is named in a diagnostic's `wrong_program` (never an author's mutant name)
PREFIX = "derived:"
# code quoted in a message: longer fragments are cut
QUOTE_CHARACTERS = 60
# the constructs of a student's file compared with a derived program's, at most
MOST_COMPARED = 2000
# the values a dimension may wrongly take
DIMENSIONS = (0, 1, 2, -1, -2)
DIM_KEYWORDS = frozenset({"dim", "start_dim", "end_dim", "axis"})
# calls whose first argument (a method) or second (a torch function) is a dimension
DIM_FIRST = frozenset(
    "sum mean softmax log_softmax argmax argmin max min cumsum cumprod prod std var "
    "logsumexp flatten unsqueeze squeeze cat stack transpose unfold select narrow chunk "
    "split amax amin".split()
)
# calls whose dimension may be left out altogether (then they reduce or flatten everything)
DIM_OPTIONAL = frozenset(
    "sum mean argmax argmin max min flatten squeeze prod std var amax amin".split()
)
SWAPPED_NAMES = {
    "sum": "mean",
    "mean": "sum",
    "amax": "amin",
    "amin": "amax",
    "vstack": "hstack",
    "hstack": "vstack",
    "split": "chunk",
    "chunk": "split",
    "from_numpy": "tensor",
}
# calls left out: the value they are called on stands in their place
CALLS_LEFT_OUT = frozenset(
    "abs sqrt exp log relu sigmoid tanh square neg float double long detach clone "
    "contiguous item".split()
)
REDUCTIONS = frozenset({"sum", "mean"})
TRANSPOSES = frozenset({"t", "T", "mT", "transpose", "swapaxes", "permute"})
# names a torch function is reached through: `torch.sum(x, 1)` is `x.sum(1)`
MODULES = frozenset({"torch", "F", "functional", "nn", "np"})
# a dtype written, and the one a student's wrong cast gives
CASTS = {"float64": "float32", "double": "float32", "float32": "int64", "float": "int64"}
CAST_METHODS = {"double": "float", "float": "long"}


@dataclass(frozen=True)
class Derived:
    """One derived wrong program: `old` is the reference's code at `line` (in `owner`, its
    top-level function or class), `new` what stands there instead ("" where it is left out,
    `after` a statement it was moved after); `seek` is the construct looked for in a student's
    source, as `signature` writes it ("" for none)."""

    name: str
    owner: str
    line: int
    old: str
    new: str
    after: str
    seek: str
    source: str

    def words(self, place: tuple[str, int, str] | None, notebook: bool) -> dict[str, str]:
        """The hint in both languages; `place` is the student's (cell, line, code) where the
        same construct stands, if the source shows it."""
        old, new, after = (f"`{_quoted(text)}`" for text in (self.old, self.new, self.after))
        if self.after:
            change = {
                "en": f"with {old} moved after {after}",
                "es": f"con {old} movido después de {after}",
            }
        elif not self.new:
            change = {"en": f"without {old}", "es": f"sin {old}"}
        else:
            change = {"en": f"with {new} in place of {old}", "es": f"con {new} en lugar de {old}"}
        said = {
            "en": f"Your values are the ones the reference solution gives {change['en']}.",
            "es": f"Tus valores son los que da la solución de referencia {change['es']}.",
        }
        if place is None:
            return said
        cell, line, code = place
        where = {"en": f"line {line}", "es": f"línea {line}"}
        if notebook:
            where = {
                "en": f"{cell}, line {line}",
                "es": f"{cell.replace('cell', 'celda', 1)}, línea {line}",
            }
        return {
            "en": f"{said['en']} Look at {where['en']}: `{_quoted(code)}`.",
            "es": f"{said['es']} Mira la {where['es']}: `{_quoted(code)}`.",
        }

    def place_in(self, cells: Iterable[tuple[str, str]]) -> tuple[str, int, str] | None:
        """Where the student's source has the construct the derived program has (first in a
        function or class of the same name, then anywhere), or None."""
        if not self.seek:
            return None
        trees = parsed(cells)
        owned = [
            (label, node)
            for label, tree in trees
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == self.owner
        ]
        compared = 0
        for scope in (owned, [(label, tree) for label, tree in trees]):
            for label, root in scope:
                for node in ast.walk(root):
                    if not self._may_be(node):
                        continue
                    compared += 1
                    if compared > MOST_COMPARED:  # a huge file: no line named rather than
                        return None  # the grader's time spent on it
                    if signature(node) == self.seek:
                        return label, node.lineno, ast.unparse(node)
        return None

    def _may_be(self, node: ast.AST) -> bool:
        """A cheap test before `signature`: a call of a name the construct calls, a subscript
        where it has one, an operation."""
        if isinstance(node, ast.Call):
            return f"{called_name(node)}(" in self.seek
        if isinstance(node, ast.Subscript):
            return "[" in self.seek
        return isinstance(node, (ast.BinOp, ast.Compare))


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_CHARACTERS else text[: QUOTE_CHARACTERS - 1] + "…"


def _module_call(node: ast.Call) -> bool:
    """`torch.sum(x, 1)`, `F.softmax(x, dim=1)`: a function reached through a module."""
    func = node.func
    if not isinstance(func, ast.Attribute):
        return False
    root = func.value
    while isinstance(root, ast.Attribute):
        if root.attr in MODULES:
            return True
        root = root.value
    return isinstance(root, ast.Name) and root.id in MODULES


class _Anonymous(ast.NodeTransformer):
    """Variables, and arithmetic on them, become `_`, a torch function its method form: the
    construct, whatever the names and intermediates a student chose."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name("_", node.ctx)

    def _blank(self, node: ast.AST) -> ast.AST:
        return ast.Name("_", ast.Load())

    visit_BinOp = visit_Compare = visit_BoolOp = _blank

    def visit_Call(self, node: ast.Call) -> ast.AST:
        through_module = _module_call(node)
        node = self.generic_visit(node)
        if through_module and node.args:
            receiver, *rest = node.args
            return ast.Call(
                ast.Attribute(receiver, node.func.attr, ast.Load()), rest, node.keywords
            )
        return node


def signature(node: ast.AST) -> str:
    """A construct as `seek` writes it: calls and subscripts with anonymous variables, other
    expressions as they are written."""
    if isinstance(node, (ast.Call, ast.Subscript)):
        return ast.unparse(_Anonymous().visit(copy.deepcopy(node)))
    if isinstance(node, (ast.BinOp, ast.Compare)):
        return ast.unparse(node)
    return ""


# An edit: the places (indices in ast.walk's order) and what each node there becomes
Edit = tuple[tuple[int, Callable[[ast.AST], ast.AST]], ...]


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def _constant(value: int) -> ast.expr:
    return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))


def _with_argument(index: int, value: ast.expr) -> Callable[[ast.AST], ast.AST]:
    def build(node: ast.Call) -> ast.AST:
        node.args[index] = value
        return node

    return build


def _with_keyword(name: str, value: ast.expr | None) -> Callable[[ast.AST], ast.AST]:
    def build(node: ast.Call) -> ast.AST:
        node.keywords = [k for k in node.keywords if k.arg != name] + (
            [ast.keyword(name, value)] if value is not None else []
        )
        return node

    return build


def _with_field(field: str, value: object) -> Callable[[ast.AST], ast.AST]:
    """The node with one field set: a call's arguments, a comparison's operators, a
    comprehension's filters."""

    def build(node: ast.AST) -> ast.AST:
        setattr(node, field, value)
        return node

    return build


def _renamed(name: str) -> Callable[[ast.AST], ast.AST]:
    def build(node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Attribute):
            node.func.attr = name
        else:
            node.func.id = name
        return node

    return build


def _dimension_edits(at: int, node: ast.Call) -> Iterator[Edit]:
    name = called_name(node)
    for keyword in node.keywords:
        if keyword.arg in DIM_KEYWORDS and _int(keyword.value) is not None:
            for value in DIMENSIONS:
                if value != _int(keyword.value):
                    yield ((at, _with_keyword(keyword.arg, _constant(value))),)
            if name in DIM_OPTIONAL and keyword.arg == "dim":
                yield ((at, _with_keyword("dim", None)),)
        if (
            keyword.arg == "keepdim"
            and isinstance(keyword.value, ast.Constant)
            and keyword.value.value is True
        ):
            yield ((at, _with_keyword("keepdim", None)),)
    if name not in DIM_FIRST:
        return
    first = 1 if name in {"cat", "stack"} or _module_call(node) else 0
    positions = range(first, first + (2 if name == "transpose" else 1))
    for position in positions:
        if position < len(node.args) and _int(node.args[position]) is not None:
            for value in DIMENSIONS:
                if value != _int(node.args[position]):
                    yield ((at, _with_argument(position, _constant(value))),)
            if name in DIM_OPTIONAL and position == len(node.args) - 1:
                yield ((at, _with_field("args", node.args[:position] + node.args[position + 1 :])),)
    if name == "unfold" and len(node.args) - first == 3:  # the window's size as its step
        yield ((at, _with_argument(first + 2, copy.deepcopy(node.args[first + 1]))),)


def _call_edits(at: int, node: ast.Call) -> Iterator[Edit]:
    name = called_name(node)
    yield from _dimension_edits(at, node)
    if name in SWAPPED_NAMES:
        yield ((at, _renamed(SWAPPED_NAMES[name])),)
    if name == "permute":
        dims = [_int(a) for a in node.args]
        if len(dims) > 1 and None not in dims:
            for i in range(len(dims) - 1):
                order = dims[:]
                order[i], order[i + 1] = order[i + 1], order[i]
                yield ((at, _with_field("args", [_constant(v) for v in order])),)
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    if name in CALLS_LEFT_OUT | TRANSPOSES and receiver is not None:
        if _module_call(node):
            if node.args and name in CALLS_LEFT_OUT:
                yield ((at, lambda call: call.args[0]),)
        else:
            yield ((at, lambda call: call.func.value),)
    if (
        name in REDUCTIONS
        and not node.args
        and not node.keywords
        and receiver is not None
        and called_name(receiver) in CALLS_LEFT_OUT
        and not _module_call(receiver)
    ):
        yield ((at, _reduced_first),)
    if name == "range":
        for position in range(len(node.args)):
            for op in (ast.Add(), ast.Sub()):
                yield ((at, _with_argument(position, _shifted(node.args[position], op))),)
    for keyword in node.keywords:
        if keyword.arg and keyword.arg not in DIM_KEYWORDS | {"keepdim"}:
            yield ((at, _with_keyword(keyword.arg, None)),)
        if isinstance(keyword.value, ast.Constant) and type(keyword.value.value) is bool:
            yield ((at, _with_keyword(keyword.arg, ast.Constant(not keyword.value.value))),)
        if (
            keyword.arg == "dtype"
            and isinstance(keyword.value, ast.Attribute)
            and keyword.value.attr in CASTS
        ):
            cast = ast.Attribute(keyword.value.value, CASTS[keyword.value.attr], ast.Load())
            yield ((at, _with_keyword("dtype", cast)),)
    if name in CAST_METHODS and receiver is not None and not node.args:
        yield ((at, _renamed(CAST_METHODS[name])),)


def _reduced_first(call: ast.Call) -> ast.Call:
    """`x.abs().mean()` taken the other way round: `x.mean().abs()`."""
    inner = call.func.value
    reduced = ast.Call(ast.Attribute(inner.func.value, call.func.attr, ast.Load()), [], [])
    return ast.Call(ast.Attribute(reduced, inner.func.attr, ast.Load()), [], [])


def _shifted(node: ast.expr, op: ast.operator) -> ast.expr:
    value = _int(node)
    if value is not None:
        return _constant(value + 1 if isinstance(op, ast.Add) else value - 1)
    return ast.BinOp(copy.deepcopy(node), op, ast.Constant(1))


def _slice_edits(at: int, node: ast.Subscript) -> Iterator[Edit]:
    index = node.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for position, part in enumerate(parts):
        bounds = (
            [("lower", part.lower), ("upper", part.upper), ("step", part.step)]
            if isinstance(part, ast.Slice)
            else [(None, part)]
        )
        for field, bound in bounds:
            value = _int(bound) if bound is not None else None
            if value is None:
                continue
            for shifted in (value - 1, value + 1):
                if field == "step" and shifted < 1:
                    continue
                yield (
                    (
                        at,
                        lambda sub, p=position, f=field, v=shifted: _set_bound(
                            sub, p, f, _constant(v)
                        ),
                    ),
                )


def _set_bound(
    node: ast.Subscript, position: int, field: str | None, value: ast.expr
) -> ast.Subscript:
    if isinstance(node.slice, ast.Tuple):
        parts = node.slice.elts
    else:
        parts = [node.slice]
    if field is None:
        parts[position] = value
    else:
        setattr(parts[position], field, value)
    if not isinstance(node.slice, ast.Tuple):
        node.slice = parts[0]
    return node


def _operator_edits(at: int, node: ast.AST) -> Iterator[Edit]:
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, (ast.Div, ast.FloorDiv)):
            yield ((at, lambda b: b.left),)
        if isinstance(node.op, ast.Mult):
            yield ((at, lambda b: b.left),)
            yield ((at, lambda b: b.right),)
        if isinstance(node.op, ast.Pow) and _int(node.right) is not None:
            yield ((at, lambda b: b.left),)
        if isinstance(node.op, ast.Sub):
            yield ((at, lambda b: ast.BinOp(b.right, ast.Sub(), b.left)),)
            yield ((at, lambda b: ast.BinOp(b.left, ast.Add(), b.right)),)
        if isinstance(node.op, (ast.Add, ast.Sub)) and _int(node.right) is not None:
            yield ((at, lambda b: b.left),)
        if isinstance(node.op, ast.Add) and _int(node.right) is None:
            yield ((at, lambda b: ast.BinOp(b.left, ast.Sub(), b.right)),)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _int(node) is None:
        yield ((at, lambda u: u.operand),)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        closed = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
        other = closed.get(type(node.ops[0]))
        if other is not None:
            yield ((at, _with_field("ops", [other()])),)


def _statement_edits(at: int, node: ast.stmt, places: dict[int, int]) -> Iterator[Edit]:
    """Statements in a block: `zero_grad()` left out or moved after `backward()`, a loss divided
    after its `backward()`, an intermediate detached where it is assigned."""
    for field in ("body", "orelse"):
        block = getattr(node, field, None)
        if not isinstance(block, list):
            continue
        backward = next((s for s in block if _statement_calls(s, "backward")), None)
        for statement in block:
            if (
                _statement_calls(statement)
                or isinstance(statement, ast.Assign)
                and isinstance(statement.targets[0], ast.Attribute)
            ):
                yield ((places[id(statement)], lambda s: ast.Pass()),)
            if (
                isinstance(statement, ast.Assign)
                and isinstance(statement.value, ast.Constant)
                and type(statement.value.value) is bool
            ):
                yield (
                    (
                        places[id(statement)],
                        lambda a: ast.Assign(
                            a.targets, ast.Constant(not a.value.value), lineno=a.lineno
                        ),
                    ),
                )
            if isinstance(statement, ast.With):
                yield ((places[id(statement)], lambda w: ast.If(ast.Constant(True), w.body, [])),)
            if isinstance(statement, ast.AugAssign):
                yield (
                    (
                        places[id(statement)],
                        lambda a: ast.Assign(
                            [a.target], ast.BinOp(_loaded(a.target), a.op, a.value), lineno=a.lineno
                        ),
                    ),
                )
            if _statement_calls(statement, "zero_grad"):
                if backward is not None and block.index(backward) > block.index(statement):
                    yield (
                        (places[id(statement)], lambda s: ast.Pass()),
                        (
                            places[id(backward)],
                            lambda b, z=statement: ast.If(
                                ast.Constant(True), [b, copy.deepcopy(z)], []
                            ),
                        ),
                    )
            target = _divided_in_place(statement)
            if (
                target
                and backward is not None
                and block.index(backward) > block.index(statement)
                and _statement_calls(backward, "backward", target)
            ):
                yield (
                    (places[id(statement)], lambda s: ast.Pass()),
                    (
                        places[id(backward)],
                        lambda b, d=statement: ast.If(
                            ast.Constant(True), [b, copy.deepcopy(d)], []
                        ),
                    ),
                )
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, (ast.BinOp, ast.Call))
            ):
                yield (
                    (
                        places[id(statement)],
                        lambda s: ast.Assign(
                            s.targets,
                            ast.Call(ast.Attribute(s.value, "detach", ast.Load()), [], []),
                            lineno=s.lineno,
                        ),
                    ),
                )


def _loaded(target: ast.expr) -> ast.expr:
    loaded = copy.deepcopy(target)
    loaded.ctx = ast.Load()
    return loaded


def _statement_calls(
    statement: ast.stmt, method: str | None = None, receiver: str | None = None
) -> bool:
    """A statement that is a call (of `method`, on `receiver`, where given)."""
    value = statement.value if isinstance(statement, ast.Expr) else None
    return (
        isinstance(value, ast.Call)
        and method in (None, called_name(value))
        and (
            receiver is None
            or isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == receiver
        )
    )


def _divided_in_place(statement: ast.stmt) -> str | None:
    """`loss = loss / n` or `loss /= n`: the name divided."""
    if (
        isinstance(statement, ast.AugAssign)
        and isinstance(statement.op, ast.Div)
        and isinstance(statement.target, ast.Name)
    ):
        return statement.target.id
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.BinOp)
        and isinstance(statement.value.op, ast.Div)
        and isinstance(statement.value.left, ast.Name)
        and statement.value.left.id == statement.targets[0].id
    ):
        return statement.targets[0].id
    return None


def _edits(owner: ast.AST) -> Iterator[tuple[ast.AST, Edit]]:
    """Every edit of the nodes under a top-level definition, with the node it starts at."""
    nodes = list(ast.walk(owner))
    places = {id(node): at for at, node in enumerate(nodes)}
    # a `while` loop's condition and block are left as they are: changed, it may never end (the
    # derived program runs in the grader's process)
    looping = {
        id(inner) for loop in nodes if isinstance(loop, ast.While) for inner in ast.walk(loop)
    }
    for at, node in enumerate(nodes):
        if id(node) in looping:
            continue
        if isinstance(node, ast.Call):
            found = _call_edits(at, node)
        elif isinstance(node, ast.Subscript):
            found = _slice_edits(at, node)
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            found = _operator_edits(at, node)
        elif isinstance(node, ast.comprehension) and node.ifs:
            found = iter((((at, _with_field("ifs", [])),),))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in {"T", "mT"}
            and isinstance(node.ctx, ast.Load)
        ):
            found = iter((((at, lambda a: a.value),),))
        else:
            found = iter(())
        for edit in found:
            yield node, edit
        if isinstance(node, (ast.FunctionDef, ast.For, ast.If, ast.With)):
            for edit in _statement_edits(at, node, places):
                yield nodes[edit[0][0]], edit


def _applied(owner: ast.AST, edit: Edit) -> tuple[ast.AST, list[ast.AST]]:
    """A copy of `owner` with the edit made, and the nodes that now stand at its places."""
    changed = copy.deepcopy(owner)
    nodes = list(ast.walk(changed))
    parents = {id(child): parent for parent in nodes for child in ast.iter_child_nodes(parent)}
    made = []
    for at, build in edit:
        old = nodes[at]
        new = build(old)
        made.append(new)
        if new is not old:
            _put(parents[id(old)], old, new)
    return changed, made


def _put(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list) and any(item is old for item in value):
            value[[i for i, item in enumerate(value) if item is old][0]] = new
            return


def derive(reference: str) -> tuple[Derived, ...]:
    """The wrong programs derived from a reference's source, each changed in one place (no two
    with the same source, none the same as the reference)."""
    tree = ast.parse(reference)
    seen = {ast.unparse(tree)}
    derived = []
    for position, owner in enumerate(tree.body):
        if not isinstance(owner, (ast.FunctionDef, ast.ClassDef)):
            continue
        for node, edit in _edits(owner):
            changed, made = _applied(owner, edit)
            program = copy.copy(tree)
            program.body = [*tree.body[:position], changed, *tree.body[position + 1 :]]
            source = ast.unparse(ast.fix_missing_locations(program))
            if source in seen:
                continue
            seen.add(source)
            derived.append(_described(len(derived), owner.name, node, edit, made, source))
    return tuple(derived)


def _described(
    number: int, owner: str, node: ast.AST, edit: Edit, made: list[ast.AST], source: str
) -> Derived:
    old, new, after = ast.unparse(node), ast.unparse(made[0]), ""
    if isinstance(node, ast.With):  # its block kept, the `with` left out
        old, new = f"with {', '.join(ast.unparse(item) for item in node.items)}:", ""
    if isinstance(node, ast.comprehension):
        old, new = " ".join(f"if {ast.unparse(test)}" for test in node.ifs), ""
    if isinstance(made[0], ast.Pass):
        new = ""
        if len(made) > 1:  # moved: the statement now follows the one it was before
            after = ast.unparse(made[1].body[0])
    seek = signature(made[0]) if new and not after else ""
    line = node.ifs[0].lineno if isinstance(node, ast.comprehension) else node.lineno
    return Derived(f"{PREFIX}{owner}:{line}:{number}", owner, line, old, new, after, seek, source)
