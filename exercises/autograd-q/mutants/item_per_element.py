import torch


def q_grads(a, b, v):
    # .item() turns each element into a Python number: Q is built outside the graph
    Q = torch.tensor([3 * x.item() ** 3 - y.item() ** 2 for x, y in zip(a.reshape(-1), b.reshape(-1))])
    Q.reshape(a.shape).backward(gradient=v)
    return a.grad, b.grad
