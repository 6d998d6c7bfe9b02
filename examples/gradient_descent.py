"""Batch gradient descent for least squares (seed 001 §5.6.1, BGDS), a fixed number of steps:
Θᵢ₊₁ = Θᵢ − η·Xᵀ(X·Θᵢ − Y), unrolled.

    streamfold linalg explain examples/gradient_descent.py --param n=1000 --param steps=4

Each step's delta is factored; its rank grows by a few per step, so a change to X costs
O(steps·k·n²) against re-evaluation's O(steps·n³) (X, Y and Θ n×n as in the thesis's Fig. 5.15c).
"""

from streamfold.linalg import iterate, matrix, program as make_program


def program(n: int = 1000, m: int = 0, p: int = 0, steps: int = 16, rate: float = 0.0001):
    m, p = m or n, p or n
    X = matrix("X", n, m)
    Y = matrix("Y", n, p)
    theta0 = matrix("Theta0", m, p)
    return make_program({"theta": iterate(steps, theta0, lambda theta: theta - rate * (X.T @ (X @ theta - Y)))})
