import torch
from torch import nn


def frozen_copy(x: torch.Tensor) -> torch.Tensor:
    # x's values, sharing x's memory, outside the autograd graph
    raise NotImplementedError


def sgd_update_(w: torch.Tensor, lr: float) -> None:
    # w -= lr * w.grad in place without recording it in the graph, then clear w.grad
    raise NotImplementedError


def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    # the model's output for x, as in inference: eval mode, no graph
    raise NotImplementedError
