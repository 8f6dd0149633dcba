import torch


def stack_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # the rows of b below those of a (1-D tensors: one row each)
    raise NotImplementedError


def stack_cols(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # the columns of b to the right of those of a (1-D tensors: one after the other)
    raise NotImplementedError


def batches(x: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    # x split along dim 0 into pieces of `size` rows (the last one may be smaller)
    raise NotImplementedError


def n_chunks(n: int, k: int) -> int:
    # how many pieces torch.arange(n).chunk(k) gives
    raise NotImplementedError


def nonzero_positions(t: torch.Tensor) -> torch.Tensor:
    # the indices of the non-zero elements of t, one row each
    raise NotImplementedError
