import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    n = x.shape[0]
    jac = torch.zeros(n, n)
    for i in range(n):
        y = torch.softmax(x, dim=0)
        e = torch.zeros(n)
        e[i] = 1.0
        x.grad = None
        y.backward(gradient=e.to(x.dtype))
        jac[i] = x.grad
    return jac
