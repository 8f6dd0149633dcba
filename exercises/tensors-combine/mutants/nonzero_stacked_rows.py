import torch


def stack_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.vstack((a, b))


def stack_cols(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.hstack((a, b))


def batches(x: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    return torch.split(x, size)


def n_chunks(n: int, k: int) -> int:
    return len(torch.arange(n).chunk(k))


def nonzero_positions(t: torch.Tensor) -> torch.Tensor:
    return torch.stack(torch.nonzero(t, as_tuple=True))  # one row per dimension
