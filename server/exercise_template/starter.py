import torch


def scaled_square(x: torch.Tensor, c: float) -> torch.Tensor:
    # c · x², element by element, keeping the graph
    raise NotImplementedError
