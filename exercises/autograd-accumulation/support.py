"""What the grader builds in your process for `train_accumulated`.

`ExampleLinear` is the course's model. `RecordingSGD` is `torch.optim.SGD` plus a log, `events`,
of what training did, in order: ("backward", i, gradient) each time a `backward()` sends a
gradient to parameter i, and ("step", i, value, .grad) for each parameter at every `step()`,
before it updates: print it to see what your training did. The grader's marks rest on the weight
and `.grad` it reads back, never on this log, which code in your process can rewrite.
"""

import torch
from torch import nn


class ExampleLinear(nn.Module):
    """One weight W; the prediction for x is W·x (the target is 2x)."""

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([float(weight)]))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs * self.weight


class RecordingSGD(torch.optim.SGD):
    def __init__(self, params, lr: float):
        super().__init__(params, lr=lr)
        self.events: list[tuple] = []
        self.recorded = [p for group in self.param_groups for p in group["params"]]
        for i, p in enumerate(self.recorded):
            p.register_hook(
                lambda grad, i=i: self.events.append(("backward", i, grad.detach().clone()))
            )

    def step(self, closure=None):
        for i, p in enumerate(self.recorded):
            grad = None if p.grad is None else p.grad.detach().clone()
            self.events.append(("step", i, p.detach().clone(), grad))
        return super().step(closure)
