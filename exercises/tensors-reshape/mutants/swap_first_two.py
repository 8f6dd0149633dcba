import torch


def rows(a: torch.Tensor) -> torch.Tensor:
    return a.reshape(-1, a.shape[-1])


def swap_last(a: torch.Tensor) -> torch.Tensor:
    return a.transpose(0, 1)  # the first two dimensions: the same as a matrix's transpose only


def add_batch_dim(img: torch.Tensor) -> torch.Tensor:
    return img.unsqueeze(0)


def flat_view(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)
