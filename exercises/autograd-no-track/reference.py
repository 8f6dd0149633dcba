import torch
from torch import nn


def frozen_copy(x: torch.Tensor) -> torch.Tensor:
    return x.detach()


def sgd_update_(w: torch.Tensor, lr: float) -> None:
    with torch.no_grad():
        w -= lr * w.grad
    w.grad = None


def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(x)
