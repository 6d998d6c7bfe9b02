"""A¹⁶ by repeated squaring (seed 001 Fig. 5.14): four products, each view squared.

    streamfold linalg explain examples/matrix_power.py --param n=4000

A change of rank k to A changes A², A⁴, A⁸, A¹⁶ by ranks 2k, 4k, 8k, 16k: every delta stays
factored (the avalanche of Fig. 5.2 avoided), O(k·n²) per batch instead of O(n³).
"""

from streamfold.linalg import iterate, matrix, program as make_program


def program(n: int = 4000, squarings: int = 4):
    A = matrix("A", n, n)
    return make_program({"power": iterate(squarings, A, lambda acc: acc @ acc)})
