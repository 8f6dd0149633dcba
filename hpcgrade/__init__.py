"""hpcgrade's client, what a course venv gets: the JSON API from a student's side (service.py,
which the `hpcgrade` command uses too; client_file.py keeps the token), an exercise's visible
checks run here (visible.py), reports as terminal text or HTML (summary.py) and, in a Jupyter kernel,
`%load_ext hpcgrade`, then `%hpcgrade login`, `check SLUG` and `submit SLUG` (magic.py).

It loads with the standard library and click alone (IPython for the magic, which the kernel
has; the course venv's torch and numpy to run the checks; tests/test_layers.py checks it). A
course venv installs it as the hpcgrade-client distribution (client/ in the checkout), with the
grader's modules the checks run with inside it, in _grader/: put on the import path here, after
everything else, where that folder is; the service's install has them at the top level.
"""

import sys
from pathlib import Path

_GRADER = Path(__file__).with_name("_grader")
if _GRADER.is_dir() and str(_GRADER) not in sys.path:
    sys.path.append(str(_GRADER))


def load_ipython_extension(ipython) -> None:
    from hpcgrade.magic import HpcgradeMagics

    ipython.register_magics(HpcgradeMagics)
