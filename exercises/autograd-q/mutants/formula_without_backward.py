import torch


def q_grads(a, b, v):
    # the right numbers, written by hand: autograd never runs
    return 9 * a.detach()**2 * v, -2 * b.detach() * v
