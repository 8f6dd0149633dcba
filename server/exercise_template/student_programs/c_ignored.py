def scaled_square(x, c):
    return x**2
