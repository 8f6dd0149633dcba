"""Small helpers shared by the tests."""
import json
from pathlib import Path


def codes(report: dict) -> set[str]:
    return {d["code"] for c in report["checks"] for d in c["diagnostics"]}


def notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []}
                                 for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


REFERENCE_Q = (Path(__file__).parents[1] / "exercises" / "autograd-q" / "reference.py").read_text()
