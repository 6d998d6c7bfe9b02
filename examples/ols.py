"""Ordinary least squares, β = (XᵀX)⁻¹XᵀY (seed 001 Fig. 5.13), maintained as rows of X change.

    streamfold linalg explain examples/ols.py --param m=2000
    streamfold linalg run examples/ols.py --param n=8 --param m=4 --source X=data/X --source Y=data/Y --output out

The views are XᵀX, its inverse, XᵀY and β; a rank-k change of X updates the inverse by
Woodbury's formula (a k×k inverse), so a batch costs O(k·m²) instead of O(n·m² + m³).
"""

from streamfold.linalg import inv, matrix, program as make_program


def program(n: int = 4000, m: int = 2000, responses: int = 1):
    X = matrix("X", n, m)
    Y = matrix("Y", n, responses)
    return make_program({"beta": inv(X.T @ X) @ (X.T @ Y)})
