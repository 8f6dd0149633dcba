import torch


def stack_rows(a, b):
    return torch.vstack((a, b))


def stack_cols(a, b):
    return torch.hstack((a, b))


def batches(x, size):
    n = x.shape[0]
    return tuple(x[i:i + size] for i in range(0, n - 1, size))


def n_chunks(n, k):
    return len(torch.arange(n).chunk(k))


def nonzero_positions(t):
    return torch.argwhere(t)
