"""Matrix expressions as text, in the thesis's notation: ``Xᵀ·X``, ``(x0)⁻¹``, ``[U, V]``.

Precedence, loosest first: ``+``/``−``, then ``·`` (and a coefficient ``2·m``), then the
postfix ``ᵀ`` and ``⁻¹``. ``[a, b]`` is the horizontal stack (the thesis's ⇒), ``[a; b]`` the
vertical one (⇓); nested stacks print flat.
"""

from __future__ import annotations

from .ir import (
    Add, Diag, Expr, Fill, HStack, Identity, Inv, Iterate, Let, Mul, Scale, Transpose, Var, VStack, Zeros,
)

_ADD, _MUL, _POST = 1, 2, 3


def show(e: Expr) -> str:
    return _show(e, 0)


def number(v: float) -> str:
    """A constant as written: integers without a point, others as Python repr."""
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _paren(text: str, prec: int, need: int) -> str:
    return f"({text})" if prec < need else text


def _show(e: Expr, need: int) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Zeros):
        return f"zeros[{e.rows},{e.cols}]"
    if isinstance(e, Identity):
        return f"id[{e.n}]"
    if isinstance(e, Fill):
        return f"fill[{e.rows},{e.cols}]({number(e.value)})"
    if isinstance(e, Diag):
        return f"diag[{e.n}]({number(e.value)})"
    if isinstance(e, Add):
        right = e.right
        if isinstance(right, Scale) and right.coef < 0:
            inner = right.arg if right.coef == -1 else Scale(-right.coef, right.arg)
            text = f"{_show(e.left, _ADD)} − {_show(inner, _ADD + 1)}"
        else:
            text = f"{_show(e.left, _ADD)} + {_show(right, _ADD + 1)}"
        return _paren(text, _ADD, need)
    if isinstance(e, Mul):
        return _paren(f"{_show(e.left, _MUL)}·{_show(e.right, _MUL + 1)}", _MUL, need)
    if isinstance(e, Scale):
        if e.coef == -1:
            return _paren(f"−{_show(e.arg, _MUL + 1)}", _MUL, need)
        return _paren(f"{number(e.coef)}·{_show(e.arg, _MUL + 1)}", _MUL, need)
    if isinstance(e, (Transpose, Inv)):
        text = _show(e.arg, _POST + 1)
        if isinstance(e.arg, (Transpose, Inv)):  # (Aᵀ)⁻¹, not Aᵀ⁻¹
            text = f"({text})"
        return text + ("ᵀ" if isinstance(e, Transpose) else "⁻¹")
    if isinstance(e, HStack):
        return "[" + ", ".join(show(p) for p in _parts(e, HStack)) + "]"
    if isinstance(e, VStack):
        return "[" + "; ".join(show(p) for p in _parts(e, VStack)) + "]"
    if isinstance(e, Let):
        return _paren(f"let {e.name} = {show(e.value)} in {show(e.body)}", 0, need)
    if isinstance(e, Iterate):
        return f"iterate[{e.times}]({show(e.init)})({e.var} ⇒ {show(e.body)})"
    raise TypeError(f"cannot print {type(e).__name__}")


def _parts(e: Expr, kind: type) -> list[Expr]:
    if isinstance(e, kind):
        return _parts(e.left, kind) + _parts(e.right, kind)  # type: ignore[attr-defined]
    return [e]
