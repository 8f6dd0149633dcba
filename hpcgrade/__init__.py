"""hpcgrade's client, what a course venv gets: the JSON API from a student's side (service.py,
which the `hpcgrade` command uses too; client_file.py keeps the token), an exercise's visible
checks run here (visible.py), reports as terminal text or HTML (summary.py) and, in a Jupyter kernel,
`%load_ext hpcgrade`, then `%hpcgrade login`, `check SLUG` and `submit SLUG` (magic.py).

It loads with the standard library alone (IPython for the magic, which the kernel has; the
course venv's torch and numpy to run the checks): the course venv installs hpcgrade with
`pip install --no-deps`, without the service's dependencies (tests/test_layers.py checks it).
"""


def load_ipython_extension(ipython) -> None:
    from hpcgrade.magic import HpcgradeMagics

    ipython.register_magics(HpcgradeMagics)
