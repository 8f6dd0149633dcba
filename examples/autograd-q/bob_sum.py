def q_grads(a, b, v):
    Q = 3 * a**3 - b**2
    Q.sum().backward()  # ignores the cotangent v
    return a.grad, b.grad
