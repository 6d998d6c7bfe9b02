"""All-pairs shortest paths within 4 hops (seed 001 Fig. 5.7 with the tropical semiring).

Under ⟨ℝ∪{+∞}, min, +⟩ the same program as reachability gives, for each pair, the shortest
distance over paths of at most ``hops`` edges. An update can add an edge or lower a weight
(⊕ is min); raising a weight or removing an edge is a deletion and is refused.

    streamfold linalg run examples/shortest_paths.py --param n=500 --source G=weights --output out
"""

from streamfold.linalg import identity, iterate, matrix, program as make_program


def program(n: int = 1000, hops: int = 4):
    G = matrix("G", n, n)
    return make_program({"distance": iterate(hops, identity(n), lambda acc: G @ acc + identity(n))},
                        semiring="tropical")
