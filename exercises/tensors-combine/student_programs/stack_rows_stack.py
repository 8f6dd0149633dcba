import math

import torch


def stack_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack((a, b))


def stack_cols(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.hstack((a, b))


def batches(x: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    return tuple(x[i:i + size] for i in range(0, x.shape[0], size))


def n_chunks(n: int, k: int) -> int:
    size = math.ceil(n / k)
    return math.ceil(n / size)


def nonzero_positions(t: torch.Tensor) -> torch.Tensor:
    return (t != 0).nonzero()
