import torch


def rows(a: torch.Tensor) -> torch.Tensor:
    return a.reshape(a.shape[0] * a.shape[1], a.shape[2])


def swap_last(a: torch.Tensor) -> torch.Tensor:
    return a.transpose(-2, -1)


def add_batch_dim(img: torch.Tensor) -> torch.Tensor:
    return img.unsqueeze(0)


def flat_view(x: torch.Tensor) -> torch.Tensor:
    return x.view(1, -1)
