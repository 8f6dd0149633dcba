import json
import os

import pytest

from server.cli import job_for
from worker.catalogue import default_root, load_catalogue, load_exercise_info
from worker.runner import HarnessProcess

# The service's process holds secrets like these; the harness and the students must never see them.
SECRETS = {"DATABASE_URL": "postgresql://hpcgrade:S3CRET-DB-PASSWORD@127.0.0.1/hpcgrade",
           "HPCGRADE_SECRET_KEY": "S3CRET-SESSION-KEY", "REDIS_URL": "redis://:S3CRET-REDIS@127.0.0.1"}


@pytest.fixture(scope="session")
def catalogue():
    return load_catalogue()


@pytest.fixture(scope="session")
def harness(tmp_path_factory):
    os.environ.update(SECRETS)
    with HarnessProcess(scratch=str(tmp_path_factory.mktemp("scratch"))) as process:
        yield process


@pytest.fixture
def grade(harness, tmp_path):
    """Grade source text (or bytes) as a submission; returns the JSON report."""
    def run(exercise: str, source, filename: str = "submission.py", seed: int = 7, **limits):
        path = tmp_path / filename
        path.write_bytes(source if isinstance(source, bytes) else source.encode())
        info = load_exercise_info(default_root() / exercise)
        job = job_for(info, path, seed=seed)
        job = type(job)(**{**job.to_dict(), "limits": {**info.limits, **limits}})
        report = harness.grade(job)
        json.dumps(report)
        return report
    return run
