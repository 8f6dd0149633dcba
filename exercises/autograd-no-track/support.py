"""Objects the grader builds inside your process for the checks of autograd-no-track."""

import torch
from torch import nn


def accumulate_grad(w: torch.Tensor, g: torch.Tensor) -> None:
    """Add g to w.grad through a real backward pass, as a loss would."""
    (w * g).sum().backward()


def backward_from(tensors: list, cotangents: list) -> None:
    """One backward pass from the sum of (t * g).sum() over the pairs, as a loss that uses each
    tensor would: a leaf gets the gradient of every tensor still recorded as depending on it,
    and nothing from one that is not."""
    loss = sum((t * g).sum() for t, g in zip(tensors, cotangents))
    loss.backward()


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def small_model(seed: int, device: str = "cpu") -> SmallNet:
    """A SmallNet in training mode whose weights and BatchNorm statistics depend only on seed."""
    generator = torch.Generator().manual_seed(seed)
    model = SmallNet()
    batch_norm = model.layers[1]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator))
        batch_norm.running_mean.copy_(torch.randn(16, generator=generator))
        batch_norm.running_var.copy_(0.5 + torch.rand(16, generator=generator))
    return model.to(device)
