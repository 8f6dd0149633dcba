"""The zygote forks every student: what it has done, each student inherits."""
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
