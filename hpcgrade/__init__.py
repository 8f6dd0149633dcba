"""hpcgrade in a student's Jupyter kernel: `%load_ext hpcgrade`, then `%hpcgrade check SLUG` and
`%hpcgrade submit SLUG`.

Standard library only (and, to run the checks, the torch of the course venv): the course venv
gets this package with `pip install --no-deps`, without the service's dependencies.
"""


def load_ipython_extension(ipython) -> None:
    from hpcgrade.magic import HpcgradeMagics
    ipython.register_magics(HpcgradeMagics)
