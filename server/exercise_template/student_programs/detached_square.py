def scaled_square(x, c):
    y = x.detach()
    return c * y**2
