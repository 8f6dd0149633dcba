import torch


def stack_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.vstack((a, b))


def stack_cols(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.hstack((a, b))


def batches(x: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    return torch.chunk(x, size)  # `size` pieces, not pieces of `size` rows


def n_chunks(n: int, k: int) -> int:
    return len(torch.arange(n).chunk(k))


def nonzero_positions(t: torch.Tensor) -> torch.Tensor:
    return torch.argwhere(t)
