"""The model of autograd-finetune, and what the grader runs with it inside your process.

Import the model in your code with `from exercise_support import SmallCNN` (to try it on your
own machine, save this file next to your notebook as `exercise_support.py`).

`small_cnn(seed)` stands for a pretrained network: its weights depend only on `seed`.
`seed_head(model, seed)` gives the new head fixed starting values, so that your model can be
compared with the reference's after training whatever else drew random numbers before.
`train(...)` is the training loop the grader runs with your model and your optimizer.
"""

import torch
from torch import nn
from torch.nn import functional as F


class SmallCNN(nn.Module):
    """3×16×16 images → 1000 scores: two conv blocks, 32·4·4 = 512 features, then `fc`."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.fc = nn.Linear(512, 1000)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(images)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def _fill(parameters, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in parameters:
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))


def small_cnn(seed: int) -> SmallCNN:
    """A SmallCNN whose weights depend only on seed: the "pretrained" model to fine-tune."""
    model = SmallCNN()
    _fill(model.parameters(), seed)
    return model


def seed_head(model: nn.Module, seed: int) -> None:
    """Fixed starting values for the parameters of `model.fc`, whatever they are."""
    _fill(model.fc.parameters(), seed + 1)


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    steps: int,
) -> list[float]:
    """`steps` steps of the usual loop on one batch, with the cross-entropy loss; the losses.
    A model with nothing left to train learns nothing (`backward()` would raise)."""
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        if loss.requires_grad:
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def every_parameter(model: nn.Module) -> list[nn.Parameter]:
    """Each parameter of the model and its submodules, read from their own state
    (`_parameters`, `_modules`), not through methods an instance can shadow."""
    found, pending = {}, [model]
    while pending:
        state = object.__getattribute__(pending.pop(), "__dict__")
        for value in dict.values(state.get("_parameters", {})):
            if value is not None:
                found[id(value)] = value
        pending.extend(m for m in dict.values(state.get("_modules", {})) if m is not None)
    return list(found.values())


def step_all(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, lr: float) -> None:
    """One step of SGD with weight decay over *every* parameter of the model, the grader's own
    optimizer: a frozen parameter (`requires_grad` False) gets no gradient and does not move; a
    trainable one moves by `-lr * (grad + 0.1 * p)`, even where a hook made its gradient zero."""
    train(
        model, torch.optim.SGD(every_parameter(model), lr=lr, weight_decay=0.1), images, labels, 1
    )
