"""The hpcgrade-client distribution: the `hpcgrade` package of the checkout above, and inside it,
as hpcgrade/_grader, the grader's modules that the visible checks run with (the harness, and the
few modules of the core it reads an exercise with). No top-level package but `hpcgrade` lands in
the course venv: a student's own `server.py` or `worker.py` shadows nothing of ours."""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CHECKOUT = Path(__file__).resolve().parent.parent
# the grader's packages, and the modules of each that the client reaches, where not all of them
# (tests/client/test_course_venv.py checks that they are what the client imports)
GRADER = {
    "server": ("__init__",),
    "server.core": ("__init__", "catalogue", "config", "setting_values", "inline_markdown"),
    "worker": ("__init__",),
    "worker.harness": None,
}


class GraderModules(build_py):
    """The grader's modules the client reaches, and the reports' translations compiled (a
    checkout keeps only their sources)."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        only = GRADER.get(package.removeprefix("hpcgrade._grader."))
        return modules if only is None else [m for m in modules if m[1] in only]

    def run(self):
        # a build folder left by an earlier build (pip builds in the tree) would still hold the
        # modules that have gone since
        shutil.rmtree(Path(self.build_lib, "hpcgrade"), ignore_errors=True)
        super().run()
        from babel.messages.mofile import write_mo
        from babel.messages.pofile import read_po

        for source in (CHECKOUT / "server" / "translations").glob("*/LC_MESSAGES/messages.po"):
            compiled = Path(self.build_lib, "hpcgrade", "_grader", source.relative_to(CHECKOUT))
            compiled = compiled.with_suffix(".mo")
            compiled.parent.mkdir(parents=True, exist_ok=True)
            with source.open("rb") as po, compiled.open("wb") as mo:
                write_mo(mo, read_po(po))


def relative(path: Path) -> str:
    return os.path.relpath(path)  # setuptools takes a package's folder relative to this one


setup(
    cmdclass={"build_py": GraderModules},
    packages=["hpcgrade", *(f"hpcgrade._grader.{p}" for p in GRADER)],
    package_dir={
        "hpcgrade": relative(CHECKOUT / "hpcgrade"),
        **{f"hpcgrade._grader.{p}": relative(CHECKOUT.joinpath(*p.split("."))) for p in GRADER},
    },
)
