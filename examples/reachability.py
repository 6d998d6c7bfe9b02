"""k-hop reachability over a growing graph (seed 001 Fig. 5.7 with the Boolean semiring).

``iterate[k](id)(acc ⇒ G·acc + id)`` is I + G + … + Gᵏ in Horner form; under ⟨{0,1}, ∨, ∧⟩ its
(i, j) entry says whether j is reachable from i in at most k hops. Edges may only be added
(the Boolean semiring has no additive inverse: a deletion is refused).

    streamfold linalg run examples/reachability.py --param n=1000 --source G=edges --output out
"""

from streamfold.linalg import identity, iterate, matrix, program as make_program


def program(n: int = 1000, hops: int = 4):
    G = matrix("G", n, n)
    return make_program({"reach": iterate(hops, identity(n), lambda acc: G @ acc + identity(n))},
                        semiring="boolean")
