"""Evaluating expressions on a back-end: re-evaluation, and the trigger program's lets.

One walker serves every back-end (:mod:`.numpy_backend`, :mod:`.spark_backend`): it maps each
IR node to the back-end's operation of the same name. Equal subexpressions of one evaluation
are computed once (``memo``), as the cost model assumes.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from ..errors import LinalgError
from .ir import Add, Diag, Expr, Fill, HStack, Identity, Inv, Mul, Scale, Transpose, Var, VStack, Zeros


def evaluate(e: Expr, env: Mapping[str, Any], backend: Any, memo: MutableMapping[Expr, Any] | None = None) -> Any:
    memo = {} if memo is None else memo
    got = memo.get(e)
    if got is not None:
        return got
    out: Any
    if isinstance(e, Var):
        try:
            return env[e.name]
        except KeyError:
            raise LinalgError(f"internal: no value for {e.name}", code="INTERNAL") from None
    if isinstance(e, Zeros):
        out = backend.zeros(e.rows, e.cols)
    elif isinstance(e, Identity):
        out = backend.identity(e.n)
    elif isinstance(e, Fill):
        out = backend.fill(e.rows, e.cols, e.value)
    elif isinstance(e, Diag):
        out = backend.diag(e.n, e.value)
    else:
        args = [evaluate(k, env, backend, memo) for k in e.children()]
        if isinstance(e, Add):
            out = backend.add(*args)
        elif isinstance(e, Mul):
            out = backend.mul(*args)
        elif isinstance(e, Scale):
            out = backend.scale(e.coef, *args)
        elif isinstance(e, Transpose):
            out = backend.transpose(*args)
        elif isinstance(e, Inv):
            out = backend.inv(*args)
        elif isinstance(e, HStack):
            out = backend.hstack(*args)
        elif isinstance(e, VStack):
            out = backend.vstack(*args)
        else:
            raise LinalgError(f"cannot evaluate {type(e).__name__}", code="INTERNAL")
    memo[e] = out
    return out
