import torch


def scaled_square(x, c):
    with torch.no_grad():
        return c * x**2
