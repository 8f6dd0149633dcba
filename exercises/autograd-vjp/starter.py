import torch


def vjp(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    # z = 2·(x + 2)²; z.backward with gradient v; return x.grad (= Jᵀv)
    raise NotImplementedError


def softmax_jacobian(x: torch.Tensor) -> torch.Tensor:
    # the (n, n) Jacobian of torch.softmax(x, dim=0) for a 1-D x: row i is the gradient of output i,
    # from a backward pass with the one-hot cotangent e_i
    raise NotImplementedError
