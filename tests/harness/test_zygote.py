"""The zygote forks every student: what it has done, each student inherits."""
import time

import pytest
import torch
from torch.autograd.variable import Variable

from worker.harness import zygote


class EngineRun(Exception):
    pass


class NoEngine:
    def run_backward(self, *args, **kwargs):
        raise EngineRun("the zygote ran autograd's engine")


def test_the_warm_up_never_runs_autograds_engine(monkeypatch):
    """On a GPU node the engine's first backward initialises CUDA and starts device threads,
    after which every forked student's backward fails ("Unable to handle autograd's threading in
    combination with fork-based multiprocessing") and its first CUDA call raises."""
    monkeypatch.setattr(Variable, "_execution_engine", NoEngine())
    with pytest.raises(EngineRun):  # the guard itself catches a backward
        torch.ones(1, requires_grad=True).sum().backward()
    zygote.warm_up_autograd()
    zygote.warm_up_optimizers()


def test_the_optimizers_warm_up_is_done_while_the_harness_is_idle(tmp_path):
    """A cold harness's first student starts without the optimizers' warm-up (torch._dynamo,
    about 1 s) and the next, sent after a quiet moment, with it: the zygote paid for it
    between the two grades, not in either."""
    from server.core.catalogue import default_root, load_exercise_info
    from worker.harness.runner import HarnessProcess
    info = load_exercise_info(default_root() / "autograd-q")
    work = tmp_path / "work.py"
    work.write_text("import sys\nprint('dynamo loaded:', 'torch._dynamo' in sys.modules)\n"
                    + (default_root() / "autograd-q" / "reference.py").read_text())
    with HarnessProcess(scratch=str(tmp_path)) as harness:
        first = harness.report_for(info.job(work, seed=1, lang="en"))
        time.sleep(zygote.IDLE_BEFORE_WARM * 10)  # a quiet moment, as between two students
        second = harness.report_for(info.job(work, seed=1, lang="en"))
    assert first.score == second.score == first.max_score
    assert "dynamo loaded: False" in first.output
    assert "dynamo loaded: True" in second.output
