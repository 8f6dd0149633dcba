"""Comparing an exercise's submissions for code alike (worker/grading/similarity.py): a copy with
its names changed ranks above solutions written apart, and what the exercise gives every student
(its starter, the code of its statement) makes no two files alike."""

import json
import re

from similar_programs import APART, EXERCISE, REFERENCE, RENAMED

from server.core.models import Submission
from server.core.similarity import compared_text
from worker.grading.similarity import boilerplate_of, ranked_pairs


def figures(pairs: list[dict]) -> dict[tuple[int, int], float]:
    return {tuple(pair["submissions"]): max(pair["similarity"]) for pair in pairs}


def test_a_copy_with_its_names_changed_ranks_above_solutions_written_apart():
    pairs = ranked_pairs(
        {1: REFERENCE, 2: RENAMED, 3: APART[0], 4: APART[1]}, boilerplate_of(EXERCISE)
    )
    assert pairs[0]["submissions"] == [1, 2]
    alike = figures(pairs)
    assert alike[(1, 2)] > 0.9
    assert all(figure < 0.5 for pair, figure in alike.items() if pair != (1, 2)), alike
    # the matching regions are in each file's own text: the copy's body, from its first def
    first, second = pairs[0]["regions"]
    assert "pack_hook" in REFERENCE[first[0][0] : first[-1][1]]
    assert "pack_hook" in RENAMED[second[0][0] : second[-1][1]]
    # each region begins and ends between words, never inside a name or a keyword
    for text, regions in ((REFERENCE, first), (RENAMED, second)):
        for start, end in regions:
            assert not re.match(r"\w\w", text[max(start - 1, 0) : start + 1]), text[start:end]
            assert not re.match(r"\w\w", text[end - 1 : end + 1]), text[start:end]


def test_the_starter_makes_no_two_files_alike():
    starter = EXERCISE.starter()
    # untouched starters, one with a blank line more: not alike at all
    assert ranked_pairs({1: starter, 2: starter + "\n\n"}, boilerplate_of(EXERCISE)) == []
    # without the starter left out they would be the same file
    assert figures(ranked_pairs({1: starter, 2: starter + "\n\n"}))[(1, 2)] == 1.0
    # two solutions written apart, each inside the starter's own lines, stay apart
    kept = "\n".join(line for line in starter.splitlines() if "NotImplementedError" not in line)
    apart = {3: kept + "\n" + APART[0], 4: kept + "\n" + APART[1]}
    assert figures(ranked_pairs(apart, boilerplate_of(EXERCISE))).get((3, 4), 0) < 0.5


def test_the_statements_code_blocks_are_boilerplate():
    texts = boilerplate_of(EXERCISE)
    assert texts[0] == EXERCISE.starter()
    blocks = re.findall(r"```python\n(.*?)```", EXERCISE.statement("en"), re.S)
    assert blocks and all(block in texts for block in blocks)


def test_a_notebook_is_compared_by_its_code_cells():
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# My answer\n", "It uses hooks."]},
            {"cell_type": "code", "source": ["%load_ext hpcgrade\n"]},
            {"cell_type": "code", "source": REFERENCE},
        ]
    }
    submission = Submission(filename="work.ipynb", code=json.dumps(notebook).encode())
    text = compared_text(submission)
    assert "My answer" not in text and REFERENCE in text
    assert figures(ranked_pairs({1: text, 2: RENAMED}, boilerplate_of(EXERCISE)))[(1, 2)] > 0.9
    assert compared_text(Submission(filename="work.py", code=b"\x00\x01")) is None
