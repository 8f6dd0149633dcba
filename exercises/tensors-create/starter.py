import numpy as np
import torch


def from_data(data: list) -> torch.Tensor:
    # the same values; an integer dtype for a list of integers
    raise NotImplementedError


def from_numpy_shared(arr: np.ndarray) -> torch.Tensor:
    # shares memory with arr: writing to one shows in the other
    raise NotImplementedError


def ones_like_float(x: torch.Tensor) -> torch.Tensor:
    # ones with x's shape, dtype float32
    raise NotImplementedError


def describe(t: torch.Tensor) -> tuple:
    # (tuple(shape), dtype, device type as a str)
    raise NotImplementedError
