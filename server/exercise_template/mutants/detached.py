import torch


def scaled_square(x, c):
    return torch.tensor([c * v.item() ** 2 for v in x.flatten()]).reshape(x.shape)
