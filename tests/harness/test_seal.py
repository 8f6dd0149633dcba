"""The seal (worker/harness/seal.py): what a submission may not do to the process that answers
the grader, refused once the process is sealed and allowed with the seal taken away, so that
each attack is known to be stopped by the seal itself; honest uses of pickle and of its own
classes stay allowed; a refusal is the submission's failure, said in both languages."""

import re

import pytest
from helpers import REFERENCE_Q

from server.core.catalogue import default_root, load_exercise_info
from worker.harness.grader import Harness

ATTEMPTS = """
import gc, io, os, pickle, sys, ctypes
import torch

def attempt(name, act):
    try:
        act()
        print("ALLOWED", name)
    except (PermissionError, TypeError, AttributeError) as exc:
        print("REFUSED", name, type(exc).__name__)

def patch_tensor():
    torch.Tensor.clone = torch.Tensor.clone

def patch_module():
    torch.nn.Linear.forward = torch.nn.Linear.forward

def server():
    frame = sys._getframe()
    while type(frame.f_locals.get("self")).__name__ != "Server":  # the harness's caller
        frame = frame.f_back
    return frame.f_locals["self"]

def patch_server():
    type(server()).encode_tensor = type(server()).encode_tensor

def shadow_server():
    server().encode_tensor = server().encode_tensor

def q_grads(a, b, v):
    attempt("tensor", patch_tensor)
    attempt("module", patch_module)
    attempt("server", patch_server)
    attempt("server-instance", shadow_server)
    attempt("gc", gc.get_objects)
    attempt("ctypes", lambda: ctypes.c_ulong.from_address(id(a)).value)
    attempt("pickle-code", lambda: pickle.loads(b"ctorch.nn.functional\\nconv2d\\n."))
    attempt("trace", lambda: sys.settrace(None))
    attempt("kill", lambda: os.kill(os.getppid(), 0))
    attempt("harness", lambda: __import__("worker.harness.pilot"))
    # honest: its own classes, tensors through pickle and torch.save
    class Own(torch.nn.Module):
        pass
    attempt("own-class", lambda: setattr(Own, "scale", 2.0))
    attempt("pickle-tensor", lambda: pickle.loads(pickle.dumps({"w": [torch.ones(2)]})))
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    attempt("torch-load", lambda: torch.load(io.BytesIO(buffer.getvalue())))
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""
REFUSED = {
    "tensor",
    "module",
    "server",
    "server-instance",
    "gc",
    "ctypes",
    "pickle-code",
    "trace",
    "kill",
    "harness",
}
HONEST = {"own-class", "pickle-tensor", "torch-load"}


@pytest.fixture(scope="module")
def harnesses(tmp_path_factory):
    """An in-process harness of each kind, sealed and not, for the module's tests."""
    scratch = str(tmp_path_factory.mktemp("scratch"))
    with Harness(scratch, sealed=True) as sealed, Harness(scratch, sealed=False) as unsealed:
        yield {True: sealed, False: unsealed}


@pytest.fixture
def grade(harnesses, tmp_path):
    def run(source: str, sealed: bool, lang: str = "en"):
        path = tmp_path / "work.py"
        path.write_text(source)
        job = load_exercise_info(default_root() / "autograd-q").job(path, seed=3)
        job = type(job)(
            **dict(
                job.to_dict(),
                lang=lang,
                required_layers=[
                    layer for layer in job.required_layers if sealed or layer != "seal"
                ],
            )
        )
        return harnesses[sealed].grade_job(job)

    return run


def said(report) -> dict[str, str]:
    return {
        line.split()[1]: line.split()[0]
        for line in report.output.splitlines()
        if line.startswith(("ALLOWED", "REFUSED"))
    }


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "seal-taken-away"])
def test_the_seal_refuses_what_forgeries_use_and_leaves_honest_code_alone(grade, sealed):
    report = grade(ATTEMPTS, sealed)
    assert report.graded and report.score == 10, report.error or report.checks
    found = said(report)
    # unsealed, the signal (0: only asks whether the zygote is there) is Landlock's to refuse
    refused = {name for name, verdict in found.items() if verdict == "REFUSED"}
    # the server's instance has no attributes of its own, sealed or not (its __slots__)
    assert refused - {"kill"} == (REFUSED - {"kill"} if sealed else {"server-instance"}), (
        report.output
    )
    assert "kill" in refused
    assert HONEST <= {name for name, verdict in found.items() if verdict == "ALLOWED"}
    assert ("seal" in report.sandbox["layers"]) == sealed


@pytest.mark.parametrize(
    "lang,words",
    [
        ("en", "setting `Tensor.backward`, an attribute of a type the grader keeps as it is"),
        (
            "es",
            "cambiar `Tensor.backward`, un atributo de un tipo que el corrector mantiene intacto",
        ),
    ],
)
def test_a_refusal_is_the_submissions_failure_said_in_its_language(grade, lang, words):
    patched = "import torch\ntorch.Tensor.backward = lambda self, *a, **k: None\n" + REFERENCE_Q
    report = grade(patched, sealed=True, lang=lang)
    assert report.graded and report.score == 0, report.error
    (note,) = report.notes
    assert note["code"] == "forbidden-operation" and words in note["message"], note
    assert note["details"]["sealed"] is True and note["details"]["line"] == 2


def test_a_refusal_in_a_call_is_that_checks_failure_said_in_its_language(grade):
    source = REFERENCE_Q.replace("    Q = ", "    import gc\n    gc.get_objects()\n    Q = ", 1)
    report = grade(source, sealed=True, lang="es")
    assert report.graded and report.score == 0, report.error
    said = [d for check in report.checks for d in check.diagnostics]
    assert said and {d["code"] for d in said} == {"forbidden-operation"}, said
    assert "`gc.get_objects()`, que llega a los objetos del corrector" in said[0]["message"]


def test_a_seal_that_cannot_be_raised_stops_the_grade_naming_it(tmp_path):
    """A zygote that did not protect torch's types (here started unsealed): the student process
    cannot seal itself, and the grade is the grader's error, never an unsealed grade."""
    from worker.harness.launch import Zygote, child_environment

    path = tmp_path / "work.py"
    path.write_text(REFERENCE_Q)
    job = load_exercise_info(default_root() / "autograd-q").job(path, seed=3)
    from worker.harness.session import SandboxIncomplete

    with (
        Harness(str(tmp_path), zygote=Zygote(child_environment(), sealed=False)) as harness,
        pytest.raises(
            SandboxIncomplete, match="missing on .*: seal .*seal: torch's types are not protected"
        ),
    ):
        harness.grade_job(job)


TAMPERS = ATTEMPTS.replace(
    "def q_grads(a, b, v):\n",
    """def q_grads(a, b, v):
    seal = sys.modules["worker.harness.seal"]
    seal._refusal = lambda event, args: None
    seal.INTROSPECTION.clear()
    seal.HARNESS_PACKAGE = "none"
    seal.PLAIN_DATA_MODULES = frozenset({"os"})
    os.getpid = lambda: os.getppid()
""",
)


def test_the_seals_own_state_cannot_be_rewritten(grade):
    """The hook reads nothing a submission can rebind (a review turned it off by rebinding the
    seal module's names through sys.modules), and the rebinding itself is found before the
    reply: the call's check fails, naming the first module changed."""
    report = grade(TAMPERS, sealed=True)
    refused = {name for name, verdict in said(report).items() if verdict == "REFUSED"}
    assert refused == REFUSED, report.output
    assert report.graded and report.score == 0, report.error
    said_ = [d for check in report.checks for d in check.diagnostics]
    assert said_ and {d["code"] for d in said_} == {"forbidden-operation"}, said_
    assert re.search(
        r"changing `(os|worker\.harness\.seal)`, which the grader answers with", said_[0]["message"]
    ), said_[0]


def test_a_tensor_turned_into_a_class_of_ones_own_is_refused_and_said(grade):
    source = REFERENCE_Q.replace("    Q = ", "    a.__class__ = Mine\n    Q = ", 1)
    report = grade("import torch\nclass Mine(torch.Tensor):\n    pass\n" + source, sealed=True)
    said_ = [d for check in report.checks for d in check.diagnostics]
    assert said_ and said_[0]["code"] == "forbidden-operation", said_
    assert "`__class__`" in said_[0]["message"]
