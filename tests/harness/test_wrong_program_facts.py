"""A known wrong program's words state a fact about the code only where the source shows it
(exercise.toml's `if_source`); a program whose values are the same and whose code is not is told
`may`, a possibility. Each neighbour here is one a held-out review was told a mistake it does
not make."""

import pytest

from server.core.catalogue import default_root, load_exercise_info

ROOT = default_root()


def reference(slug: str) -> str:
    return (ROOT / slug / "reference.py").read_text()


def changed(slug: str, old: str, new: str) -> str:
    source = reference(slug)
    assert old in source
    return source.replace(old, new)


def mutant(slug: str, program: str) -> str:
    return (ROOT / slug / "mutants" / f"{program}.py").read_text()


# each known wrong program whose words state a fact about the code: (its exercise and name) →
# (a program that has the fact, a neighbour with its values and without the fact)
NEIGHBOURS = {
    # float32 by `.float()`, with no `torch.zeros` (told "your output starts as torch.zeros")
    ("conv2d-einsum", "offsets_default_dtype"): (
        lambda: mutant("conv2d-einsum", "offsets_default_dtype"),
        lambda: changed(
            "conv2d-einsum",
            'return torch.einsum("bchwij,ocij->bohw", windows, filter)',
            'return torch.einsum("bchwij,ocij->bohw", windows, filter).float()',
        ),
    ),
    # retain_grad() on a second `x1 * x2`, not on the z1 f is built from (told to call it)
    ("autograd-graph", "intermediates_none"): (
        lambda: mutant("autograd-graph", "intermediates_none"),
        lambda: changed(
            "autograd-graph",
            "    z1.retain_grad()\n    z2.retain_grad()",
            "    (x1 * x2).retain_grad()\n    (x3 * x4).retain_grad()",
        ),
    ),
    # hooks active while fn(x) runs, every file deleted in a `finally` (told they were not active)
    # no hooks at all: its words ("your hooks were not active") are a fact there
    ("autograd-saved-hooks", "forward_outside_hooks"): (
        lambda: changed(
            "autograd-saved-hooks",
            """    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = fn(x)""",
            "    y = fn(x)",
        ),
        lambda: changed(
            "autograd-saved-hooks",
            """    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = fn(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    return grad""",
            """    packed = []

    def pack_and_note(tensor):
        packed.append(pack_hook(tensor))
        return packed[-1]

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack_and_note, unpack_hook):
            y = fn(x)
        (grad,) = torch.autograd.grad(y.sum(), x)
    finally:
        for p in packed:
            if not isinstance(p, torch.Tensor) and os.path.exists(p.name):
                os.remove(p.name)
    return grad""",
        ),
    ),
    # a backward through detached copies, the leaves' .grad None (told "a formula written by hand")
    ("autograd-q", "formula_without_backward"): (
        lambda: mutant("autograd-q", "formula_without_backward"),
        lambda: changed(
            "autograd-q",
            "    Q = 3 * a**3 - b**2",
            "    a, b = a.detach().requires_grad_(), b.detach().requires_grad_()\n"
            "    Q = 3 * a**3 - b**2",
        ),
    ),
    # dtype=torch.float32 with torch.tensor (told "torch.Tensor(data) always makes float32")
    ("tensors-create", "from_data_float"): (
        lambda: mutant("tensors-create", "from_data_float"),
        lambda: changed(
            "tensors-create",
            "    return torch.tensor(data)",
            "    return torch.tensor(data, dtype=torch.float32)",
        ),
    ),
    # chunk's pieces cut by hand (told "chunk(x, size) takes a number of pieces")
    ("tensors-combine", "batches_chunk"): (
        lambda: mutant("tensors-combine", "batches_chunk"),
        lambda: changed(
            "tensors-combine",
            "    return torch.split(x, size)",
            "    n = -(-x.shape[0] // size)\n"
            "    return tuple(x[i : i + n] for i in range(0, x.shape[0], n))",
        ),
    ),
}


def told(report: dict, program: str) -> str:
    hints = [
        d.get("hint")
        for c in report["checks"]
        for d in c["diagnostics"]
        if d["details"].get("wrong_program") == program
    ]
    assert hints, [(c["name"], c["diagnostics"][:1]) for c in report["checks"] if not c["passed"]]
    return hints[0]


@pytest.mark.parametrize("slug, program", sorted(NEIGHBOURS))
def test_a_neighbour_is_told_a_possibility_and_the_mistake_itself_the_fact(grade, slug, program):
    with_fact, neighbour = NEIGHBOURS[(slug, program)]
    words = load_exercise_info(ROOT / slug).wrong_programs[program]
    assert told(grade(slug, neighbour(), seed=3), program) == words["may"]["en"]
    assert told(grade(slug, with_fact(), seed=3), program) == words["says"]["en"]


def test_the_words_these_neighbours_test_come_with_a_condition():
    """The known wrong programs whose words say what the code does ("your output starts as",
    "call …") are the ones with `if_source`; this list grows with them."""
    conditioned = {
        (info.slug, name)
        for info in map(
            load_exercise_info, sorted(p for p in ROOT.iterdir() if (p / "exercise.toml").is_file())
        )
        for name, words in info.wrong_programs.items()
        if "if_source" in words
    }
    assert set(NEIGHBOURS) == conditioned


def test_a_word_of_the_source_is_read_from_its_syntax_not_its_comments():
    from worker.harness.source_rules import said_of

    words = {
        "says": {"en": "fact"},
        "may": {"en": "maybe"},
        "if_source": {"has": ["zeros"], "lacks": ["dtype"]},
    }
    assert said_of(words, (("cell", "out = torch.zeros(3)\n"),))["en"] == "fact"
    assert said_of(words, (("cell", "out = torch.ones(3)  # torch.zeros\n"),))["en"] == "maybe"
    assert said_of(words, (("cell", "out = torch.zeros(3, dtype=x.dtype)\n"),))["en"] == "maybe"
    assert said_of({"says": {"en": "fact"}}, ())["en"] == "fact"
    # a job in the spool written by the service before the upgrade: the words alone
    assert said_of({"en": "fact", "es": "hecho"}, ())["es"] == "hecho"
