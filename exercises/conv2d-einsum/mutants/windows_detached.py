import torch


def conv2d(input, filter):
    kh, kw = filter.shape[-2:]
    windows = input.detach().unfold(2, kh, 1).unfold(3, kw, 1)  # no gradient reaches input
    return torch.einsum("bchwij,ocij->bohw", windows, filter)
