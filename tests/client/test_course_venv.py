"""A course venv made as docs/operations.md says (its own torch, numpy and Jupyter, then
`pip install CHECKOUT/client`) runs `hpcgrade starter`, `hpcgrade check` and `%hpcgrade` in a
real kernel against the service, with no top-level package of the service's in it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import REFERENCE_Q
from test_client_output import portal  # noqa: F401 - a fixture

pytestmark = pytest.mark.course_venv
# the portal on SQLite alone: what is tested is the client in the course's venv, and each run
# grades under the venv's own python (a grader and a zygote importing torch, 45 s under CI)
ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="session")
def course_venv(tmp_path_factory, worker_id):
    """Made once a run (a minute of pip): pytest would make a module's again per database, and
    each xdist worker its own, so the workers of one run share it, the first making it."""
    run_folder = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        run_folder = run_folder.parent  # the run's, above each worker's
    venv = run_folder / "course-venv"
    with FileLock(run_folder / "course-venv.lock"):
        if not (venv / "made").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
            # the course's own: torch (this machine's CPU build; a cluster's CUDA one), numpy,
            # Jupyter
            subprocess.run([*pip, "torch==2.13.0", "numpy", "ipykernel", "nbclient"], check=True)
            subprocess.run([*pip, str(ROOT / "client")], check=True)
            (venv / "made").touch()
    return venv


def run(venv: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", **env),
    )  # fmt: skip


def test_the_course_venv_holds_no_package_of_the_service(course_venv, tmp_path):
    site = next((course_venv / "lib").glob("python3*/site-packages"))
    assert not {"server", "worker"} & {p.name for p in site.iterdir()}
    found = run(course_venv, "python", "-c", "import server", cwd=tmp_path)
    assert "No module named 'server'" in found.stderr
    (tmp_path / "server.py").write_text("MINE = True\n")  # a student's own module is theirs
    own = run(
        course_venv, "python", "-c", "import hpcgrade, server; print(server.MINE)", cwd=tmp_path
    )
    assert own.stdout == "True\n", own.stderr
    pip_check = run(course_venv, "python", "-m", "pip", "check", cwd=ROOT.parent)
    assert pip_check.returncode == 0, pip_check.stdout


@ON_SQLITE
def test_starter_and_check_run_in_the_course_venv(course_venv, portal, tmp_path):  # noqa: F811
    env = {"HPCGRADE_SERVER": portal, "HPCGRADE_TOKEN": os.environ["HPCGRADE_TOKEN"]}
    started = run(course_venv, "hpcgrade", "starter", "autograd-q", cwd=tmp_path, **env)
    assert started.returncode == 0, started.stderr
    work = tmp_path / "autograd-q" / "autograd_q.py"
    failed = run(course_venv, "hpcgrade", "check", "autograd-q", str(work), "--json", cwd=tmp_path, **env)  # fmt: skip
    assert json.loads(failed.stdout)["score"] < json.loads(failed.stdout)["max_score"]
    work.write_text(REFERENCE_Q)
    passed = run(course_venv, "hpcgrade", "check", "autograd-q", str(work), "--lang", "es", cwd=tmp_path, **env)  # fmt: skip
    assert passed.returncode == 0, passed.stderr
    assert "3 / 3" in passed.stdout and "el ejemplo del enunciado" in passed.stdout  # translated


@ON_SQLITE
def test_the_magic_runs_in_a_real_kernel_and_a_failure_stops_run_all(course_venv, portal, tmp_path):  # noqa: F811
    script = tmp_path / "run_notebook.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import nbclient, nbformat
            cells = json.loads(sys.argv[1])
            notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
            try:
                nbclient.NotebookClient(notebook, timeout=240).execute()
            except nbclient.exceptions.CellExecutionError:
                pass
            print(json.dumps([[o.get("text") or o.get("data", {}).get("text/plain") or o.get("ename")
                               for o in cell.outputs] for cell in notebook.cells]))
            """
        )
    )
    cells = ["%load_ext hpcgrade", "%hpcgrade course pytorch", REFERENCE_Q,
             "%hpcgrade check autograd-q", "%hpcgrade check no-such-exercise", "print('after')"]  # fmt: skip
    env = {"HPCGRADE_SERVER": portal, "HPCGRADE_TOKEN": os.environ["HPCGRADE_TOKEN"]}
    ran = run(course_venv, "python", str(script), json.dumps(cells), cwd=tmp_path, **env)
    assert ran.returncode == 0, ran.stderr
    outputs = json.loads(ran.stdout.splitlines()[-1])
    assert "for course pytorch" in outputs[1][0]
    assert "autograd-q — this notebook: 3 / 3" in outputs[3][0]
    assert "no-such-exercise" in " ".join(map(str, outputs[4]))
    assert outputs[5] == []  # "Run all" stopped at the failed line
