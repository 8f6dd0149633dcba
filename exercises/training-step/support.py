"""What the grader builds in your process for `train_step`.

`TinyNet` is the network trained (6 inputs, 3 outputs); `tiny_net(seed)` gives one whose weights
depend only on seed, and `linear_model` one layer with the weights you give. `RecordingSGD` is
`torch.optim.SGD` plus a log, `events`, of what training did, in order: ("backward", i) each time
a `backward()` sends a gradient to parameter i, and ("step", i, .grad) for each parameter at
every `step()`, before it updates. The grader's marks rest on the parameters and `.grad` it reads
back after each call, never on this log, which code in your process can rewrite; the log only
helps it say which mistake a wrong value comes from.
"""

import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(6, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, data: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(data)))


def tiny_net(seed: int) -> TinyNet:
    generator = torch.Generator().manual_seed(seed)
    model = TinyNet()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator))
    return model


def linear_model(weight: list, bias: list) -> nn.Linear:
    """nn.Linear with these values: weight is a list of rows, one per output."""
    model = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        model.weight.copy_(torch.tensor(weight))
        model.bias.copy_(torch.tensor(bias))
    return model


class RecordingSGD(torch.optim.SGD):
    def __init__(self, params, lr: float, momentum: float = 0.0):
        super().__init__(params, lr=lr, momentum=momentum)
        self.events: list[tuple] = []
        self.recorded = [p for group in self.param_groups for p in group["params"]]
        for i, p in enumerate(self.recorded):
            p.register_hook(lambda grad, i=i: self.events.append(("backward", i)))

    def step(self, closure=None):
        for i, p in enumerate(self.recorded):
            self.events.append(("step", i, None if p.grad is None else p.grad.detach().clone()))
        return super().step(closure)
