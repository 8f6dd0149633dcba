def scaled_square(x, c):
    return 2 * c * x
