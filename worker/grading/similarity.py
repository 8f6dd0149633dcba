"""Comparing an exercise's counted submissions for code alike (server/core/similarity.py asks for
it): every pair, with copydetect, which tokenises each file (a variable's name becomes V, a
function's F, a string S, comments and spacing go), fingerprints its runs of tokens by
winnowing, and finds the runs two files share. What the exercise gives every student, its
starter and the code blocks of its statement, is boilerplate: shared by all, it makes no two
files alike.

A pair's figures are each file's share of its code found in the other: a short file copied
whole into a long one is 100% of the first. The pairs are ranked by the larger figure."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable

import numpy as np
from copydetect import CodeFingerprint, compare_files
from sqlalchemy import delete, select

from server.core.catalogue import ExerciseInfo, current_info
from server.core.courses import exercise_folder
from server.core.db import Database
from server.core.models import Exercise, SimilarityRun, Submission, utcnow
from server.core.similarity import compared_text, counted_submissions

# copydetect's defaults: a match shorter than NOISE_TOKENS tokens is noise (a loop's header, an
# import line); one of GUARANTEE_TOKENS or more is always found
NOISE_TOKENS = 25
GUARANTEE_TOKENS = 30
WINDOW = GUARANTEE_TOKENS - NOISE_TOKENS + 1
# the pairs a page lists: beyond the most alike few hundred, nobody reads them
KEPT_PAIRS = 200
CODE_BLOCK = re.compile(r"^```[ \t]*(?:python|py|ipython)?[ \t]*\n(.*?)^```", re.M | re.S)
LANGUAGE = "python"


def boilerplate_of(info: ExerciseInfo) -> list[str]:
    """The code every student of the exercise was given: its starter, and each code block of
    its statement in both languages."""
    texts = [info.starter()]
    for lang in ("en", "es"):
        texts += CODE_BLOCK.findall(info.statement(lang))
    return texts


def _fingerprint(text: str, window: int, boilerplate: np.ndarray | None = None) -> CodeFingerprint:
    return CodeFingerprint(
        "submission.py", NOISE_TOKENS, window, boilerplate, language=LANGUAGE, fp=io.StringIO(text)
    )


def _common_hashes(boilerplate: Iterable[str]) -> np.ndarray:
    """Every run of tokens of the boilerplate (no winnowing: all are left out of the files)."""
    hashes: list[int] = []
    for text in boilerplate:
        hashes.extend(_fingerprint(text, 1).hashes)
    return np.unique(np.array(hashes, dtype=np.int64))


def ranked_pairs(texts: dict[int, str], boilerplate: Iterable[str] = ()) -> list[dict]:
    """The most alike pairs of `texts` (submission id → code), most alike first: each a dict of
    its two submissions, each one's share of its code found in the other (0 to 1), and the
    matching regions of each ([start, end) character offsets into its text)."""
    common = _common_hashes(boilerplate)
    prints = {number: _fingerprint(text, WINDOW, common) for number, text in texts.items()}
    numbers = sorted(prints)
    found = []
    for index, first in enumerate(numbers):
        for second in numbers[index + 1 :]:
            overlap, shares, slices = compare_files(prints[first], prints[second])
            if overlap:
                shares = [round(min(float(share), 1.0), 4) for share in shares]
                found.append((-max(shares), first, second, shares, slices))
    found.sort(key=lambda pair: pair[:3])
    # only the pairs kept have their regions read: most of an exercise's pairs share something
    return [
        {
            "submissions": [first, second],
            "similarity": shares,
            "regions": [
                _regions(one, texts[number]) for one, number in zip(slices, (first, second))
            ],
        }
        for _most, first, second, shares, slices in found[:KEPT_PAIRS]
    ]


def _regions(slices: np.ndarray, text: str) -> list[list[int]]:
    """copydetect's slices, widened to whole words: its offsets from the tokens back to the text
    may cut a name or a keyword (`clas|s`)."""
    regions = []
    for start, end in zip(*slices):
        start, end = int(start), min(int(end), len(text))
        while 0 < start < len(text) and _word(text[start - 1]) and _word(text[start]):
            start -= 1
        while 0 < end < len(text) and _word(text[end - 1]) and _word(text[end]):
            end += 1
        regions.append([start, end])
    return regions


def _word(character: str) -> bool:
    return character.isalnum() or character == "_"


def compare(database: Database, run_id: int) -> int:
    """Make the comparison `run_id` asked for, store its pairs and leave it as the exercise's
    last: the ones before it are deleted, one whose worker was lost before it finished too.
    Returns the submissions compared; 0 for a run that is gone (withdrawn) or already made (its
    message delivered again)."""
    with database.sessions() as session:
        run = session.get(SimilarityRun, run_id)
        if run is None or run.finished_at is not None:
            return 0
        exercise = session.get(Exercise, run.exercise_id)
        counted = counted_submissions(session, exercise)
        texts = {
            submission.id: text
            for submission in session.scalars(
                select(Submission).where(Submission.id.in_(counted.values()))
            )
            if (text := compared_text(submission)) is not None
        }
        info = current_info(exercise_folder(exercise))
        run.pairs = ranked_pairs(texts, boilerplate_of(info) if info is not None else ())
        run.compared, run.finished_at = len(texts), utcnow()
        session.execute(
            delete(SimilarityRun).where(
                SimilarityRun.exercise_id == exercise.id,
                SimilarityRun.id < run.id,
            )
        )
        session.commit()
        return len(texts)
