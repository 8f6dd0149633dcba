import torch


def q_grads(a, b, v):
    Q = 3 * a ** 3 - b ** 2
    # v·Q is a scalar, and its gradient is the vector-Jacobian product
    torch.dot(Q, v).backward()
    return a.grad, b.grad
