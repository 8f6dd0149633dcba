"""`python -m worker.cli`: the `hpcgrade` command without its console script."""

from worker.cli.main import main

main()
