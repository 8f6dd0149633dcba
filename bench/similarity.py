"""Wall time of comparing an exercise's counted submissions for code alike (the task's whole work,
worker/grading/similarity.py `compare`: the submissions read from the database, fingerprinted,
every pair compared, the pairs stored), on SQLite, for a course of N students.

The submissions are synthetic and built from the exercise's own programs (its reference, its
mutants and its known wrong programs: what students write): each student's is one of them with
its local names renamed, comments added and spacing changed, and, for some, a helper or a test
block of their own; a tenth are notebooks (the code split into cells, with Markdown between).
`--copied` of them are another student's file renamed again (a copy with its names changed):
the figure beside the time is where those pairs rank.

    .venv/bin/python bench/similarity.py [--students 200] [--copied 10] [--exercise SLUG]
"""

from __future__ import annotations

import argparse
import ast
import json
import keyword
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import new_course  # noqa: E402
from sqlalchemy import select  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.catalogue import load_catalogue  # noqa: E402
from server.core.db import Database  # noqa: E402
from server.core.exercises import sync_exercises  # noqa: E402
from server.core.models import Exercise, SimilarityRun, Submission  # noqa: E402
from server.core.similarity import compared_text  # noqa: E402
from server.core.users import add_user  # noqa: E402
from worker.grading.similarity import compare  # noqa: E402

WORDS = (
    "data value item thing result out tmp acc total buf arr vec mat store saved z w k n m".split()
)
COMMENTS = ["# try this", "# works now", "# TODO tidy", "# see the statement", "# helper", "# ok"]
HELPERS = [
    "\n\ndef _check(t):\n    assert t is not None\n    return t.shape\n",
    '\n\nif __name__ == "__main__":\n    import torch\n    a = torch.randn(3, requires_grad=True)\n'
    "    print(a)\n",
    "\n\ndef debug(*args):\n    for arg in args:\n        print(type(arg), arg)\n",
]


def own_names(source: str) -> set[str]:
    """The names a program makes up itself (parameters, locals, its classes), not those the
    exercise asks for (its top-level functions) nor what it imports."""
    tree = ast.parse(source)
    asked = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    made = {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    made |= {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    made |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    return made - asked - imported - {"self"} - set(keyword.kwlist)


def renamed(source: str, rng: random.Random) -> str:
    """The program with its own names changed (not an attribute that has the same name), its
    comments changed, a comment added here and there, and its indent made 2, 3 or 4 spaces."""
    names = {name: f"{rng.choice(WORDS)}_{rng.randrange(100)}" for name in own_names(source)}
    if names:
        pattern = re.compile(r"(?<![.\w])(" + "|".join(map(re.escape, names)) + r")\b")
        source = pattern.sub(lambda found: names[found[1]], source)
    indent = rng.choice((2, 3, 4))
    unit = min(
        (len(line) - len(line.lstrip(" ")) for line in source.splitlines() if line.startswith(" ")),
        default=4,
    )
    out = []
    for line in source.splitlines():
        code = line.lstrip(" ")
        depth = (len(line) - len(code)) // unit
        code = re.sub(r"  # .*$|^# .*$", lambda _found: "  " + rng.choice(COMMENTS), code)
        out.append(
            " " * (depth * indent) + code.lstrip()
            if code.startswith("  #")
            else " " * (depth * indent) + code
        )
        if code.strip() and rng.random() < 0.1:
            out.append(" " * (depth * indent) + rng.choice(COMMENTS))
    return "\n".join(out) + "\n"


def written_apart(source: str, rng: random.Random) -> str:
    """Small choices each student makes their own way: a returned value named first, a sum
    written as a function, a condition in parentheses."""
    out = []
    for line in source.splitlines():
        code = line.lstrip()
        indent = line[: len(line) - len(code)]
        if code.startswith("return ") and rng.random() < 0.5:
            out += [f"{indent}answer = {code[7:]}", f"{indent}return answer"]
            continue
        if rng.random() < 0.5:
            line = re.sub(r"(\w+)\.sum\(\)", r"torch.sum(\1)", line)
        if code.startswith(("if ", "while ")) and rng.random() < 0.5:
            line = re.sub(r"^(\s*\w+) (.*):$", r"\1 (\2):", line)
        out.append(line)
    return "\n".join(out) + "\n"


def as_notebook(source: str) -> bytes:
    """The code in cells, one per top-level block, with a Markdown cell before each."""
    cells, current = [], []
    for line in source.splitlines(keepends=True):
        if (
            current
            and line[:1] not in ("", " ", "\n", "\t", ")")
            and line.startswith(("def", "class"))
        ):
            cells.append("".join(current))
            current = []
        current.append(line)
    cells.append("".join(current))
    notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for number, code in enumerate(cells):
        notebook["cells"] += [
            {"cell_type": "markdown", "metadata": {}, "source": [f"## Part {number + 1}"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "source": code},
        ]
    return json.dumps(notebook).encode()


def programs(slug: str) -> list[str]:
    folder = ROOT / "exercises" / slug
    found = [folder / "reference.py"]
    for kind in ("mutants", "student_programs"):
        found += sorted((folder / kind).glob("*.py"))
    return [path.read_text() for path in found]


def files(students: int, copied: int, slug: str, rng: random.Random) -> tuple[list, list]:
    """(filename, code) of each student's counted submission, and the pairs of students whose
    second is a copy of the first."""
    bases = programs(slug)
    made = []
    for _ in range(students):
        code = renamed(written_apart(rng.choice(bases), rng), rng)
        if rng.random() < 0.4:
            code += rng.choice(HELPERS)
        made.append(code)
    copies = []
    for copy in rng.sample(range(1, students), copied):
        original = rng.randrange(copy)
        made[copy] = renamed(made[original], rng)
        copies.append((original, copy))
    return [
        ("work.ipynb", as_notebook(code)) if rng.random() < 0.1 else ("work.py", code.encode())
        for code in made
    ], copies


def stored(url: str, slug: str, submissions: list) -> tuple[int, list[int]]:
    """A course with one student per submission; the comparison's id and the submissions' ids."""
    database = Database(url)
    with database.sessions() as session:
        course = new_course(session, "bench")
        sync_exercises(session, course, load_catalogue())
        exercise = session.scalar(select(Exercise).where(Exercise.slug == slug))
        ids = []
        for number, (filename, code) in enumerate(submissions):
            user = add_user(
                session,
                f"s{number:04}",
                f"Student {number}",
                f"s{number}@uni.es",
                "student",
                None,
                course=course,
            )
            row = Submission(
                user=user,
                exercise=exercise,
                filename=filename,
                code=code,
                sha256="-",
                status="graded",
                score=10.0,
                max_score=10.0,
            )
            session.add(row)
            session.flush()
            ids.append(row.id)
        run = SimilarityRun(exercise_id=exercise.id)
        session.add(run)
        session.commit()
        return run.id, ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--copied", type=int, default=10)
    parser.add_argument("--exercise", default="autograd-saved-hooks")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    submissions, copies = files(args.students, args.copied, args.exercise, rng)
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/similarity.sqlite"
        migrate.upgrade(url)
        run_id, ids = stored(url, args.exercise, submissions)
        database = Database(url)
        started = time.perf_counter()
        compared = compare(database, run_id)
        seconds = time.perf_counter() - started
        with database.sessions() as session:
            pairs = session.get(SimilarityRun, run_id).pairs
    ranked = [tuple(pair["submissions"]) for pair in pairs]
    ranks = [
        ranked.index((ids[a], ids[b])) + 1 if (ids[a], ids[b]) in ranked else None
        for a, b in copies
    ]
    lines = sum(
        len(compared_text(Submission(filename=name, code=code)).splitlines())
        for name, code in submissions
    )
    print(
        f"{args.exercise}: {compared} students' counted submissions ({lines / len(submissions):.0f} lines each on average, "
        f"{sum(name.endswith('.ipynb') for name, _ in submissions)} notebooks), "
        f"{compared * (compared - 1) // 2} pairs compared"
    )
    print(
        f"  the task's whole work: {seconds:.2f} s ({seconds / max(1, compared * (compared - 1) // 2) * 1e6:.0f} µs a pair)"
    )
    print(
        f"  {len(pairs)} most alike pairs kept; the {len(copies)} copies with names changed rank: {sorted(rank or len(pairs) + 1 for rank in ranks)}{' (beyond the kept: ' + str(ranks.count(None)) + ')' if None in ranks else ''}"
    )
    print(f"  pairs at 100% on both sides: {sum(min(pair['similarity']) >= 1.0 for pair in pairs)}")


if __name__ == "__main__":
    main()
