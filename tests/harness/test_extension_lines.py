"""A notebook that follows the docs has `%load_ext hpcgrade` and `%hpcgrade …` lines: the grader
leaves them out without a note, as `check` does (issue 23: three notes "IPython line 1 was not
run", in Jupyter and on the portal). Other magics are still noted."""

import json

from worker.harness.submission import notebook_cells


def notebook(*sources: str) -> str:
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [
                {"cell_type": "code", "source": source, "metadata": {}, "outputs": []}
                for source in sources
            ],
        }
    )


def test_the_extensions_own_lines_are_not_run_and_not_noted():
    read = notebook_cells(
        notebook(
            "%load_ext hpcgrade",
            "import torch\n%hpcgrade check autograd-q",
            "  %reload_ext hpcgrade\n%hpcgrade submit autograd-q --lang es",
        )
    )
    assert read.notes == ()
    assert [code for _cell, code in read.cells] == [
        "pass  # neutralised: %load_ext hpcgrade",
        "import torch\npass  # neutralised: %hpcgrade check autograd-q",
        "  pass  # neutralised: %reload_ext hpcgrade\n"
        "pass  # neutralised: %hpcgrade submit autograd-q --lang es",
    ]


def test_other_magics_beside_them_are_still_noted():
    read = notebook_cells(
        notebook(
            "%load_ext hpcgrade\n%matplotlib inline\n!nvidia-smi",
            "%load_ext autoreload\n%hpcgrader",
        )
    )
    assert read.notes == (
        {"cell": "cell 1", "kind": "neutralised", "lines": [2, 3]},
        {"cell": "cell 2", "kind": "neutralised", "lines": [1, 2]},
    )
