"""Constraint expressions: a tiny parsed language over parameter and problem names, never eval().

Grammar (lowest precedence first):
    expr   := or
    or     := and ("or" and)*
    and    := not ("and" not)*
    not    := "not" not | cmp
    cmp    := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
    sum    := term (("+" | "-") term)*
    term   := unary (("*" | "/" | "//" | "%") unary)*
    unary  := "-" unary | power
    power  := atom ("**" unary)?
    atom   := NUMBER | 'STRING' | "STRING" | NAME | FUNC "(" expr ("," expr)* ")" | "(" expr ")"
    NAME   := identifier | "device." identifier    (a device's values: see device_values.py)
    FUNC   := min | max | ceil | floor | abs
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

TOKEN = re.compile(r"""\s*(?:(?P<num>\d+\.\d*|\.\d+|\d+)|(?P<str>'[^']*'|"[^"]*")|(?P<name>device\.[A-Za-z_]\w*|[A-Za-z_]\w*)
                       |(?P<op>==|!=|<=|>=|//|\*\*|[-+*/%<>(),]))""", re.VERBOSE)
KEYWORDS = {"and", "or", "not"}
BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
          "<=": operator.le, ">": operator.gt, ">=": operator.ge}
COMPARE = ("==", "!=", "<", "<=", ">", ">=")


def _power(base, exponent):
    """`**`, refusing exponents that would take the machine's memory (2 ** 10 ** 9)."""
    if abs(exponent) > 64:
        raise OverflowError(f"exponent {exponent} is too large")
    return base ** exponent


BINARY["**"] = _power
FUNCTIONS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "abs": abs}


class ExprError(ValueError):
    """A constraint that does not parse, or names something unknown."""


@dataclass(frozen=True)
class Expr:
    text: str
    tree: tuple
    names: frozenset

    def __call__(self, env: dict):
        return _eval(self.tree, env)


def _tokens(text: str) -> list[tuple[str, object]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"unexpected character {text[pos:].lstrip()[:1]!r} at position {pos}")
        pos = m.end()
        if m["num"] is not None:
            out.append(("num", float(m["num"]) if "." in m["num"] else int(m["num"])))
        elif m["str"] is not None:
            out.append(("str", m["str"][1:-1]))
        elif m["name"] is not None:
            word = m["name"]
            out.append(("op", word) if word in KEYWORDS else ("name", word))
        else:
            out.append(("op", m["op"]))
    return out


class _Parser:
    def __init__(self, tokens):
        self.toks, self.i = tokens, 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("end", None)

    def take(self, *ops):
        kind, value = self.peek()
        if kind == "op" and value in ops:
            self.i += 1
            return value
        return None

    def binary(self, ops, sub):
        """A left-to-right chain as one flat node, so 1000 terms need no 1000-deep recursion."""
        first, rest = sub(), []
        while (op := self.take(*ops)) is not None:
            rest.append((op, sub()))
        return ("chain", first, tuple(rest)) if rest else first

    def or_(self):
        return self.binary(("or",), self.and_)

    def and_(self):
        return self.binary(("and",), self.not_)

    def not_(self):
        if self.take("not"):
            return ("not", self.not_())
        return self.cmp()

    def cmp(self):
        left = self.sum()
        if (op := self.take(*COMPARE)) is not None:
            left = (op, left, self.sum())
            if self.take(*COMPARE):
                raise ExprError("chained comparisons are not supported; join them with 'and'")
        return left

    def sum(self):
        return self.binary(("+", "-"), self.term)

    def term(self):
        return self.binary(("*", "/", "//", "%"), self.unary)

    def unary(self):
        if self.take("-"):
            return ("neg", self.unary())
        base = self.atom()
        if self.take("**"):
            return ("**", base, self.unary())
        return base

    def atom(self):
        kind, value = self.peek()
        if kind in ("num", "str"):
            self.i += 1
            return ("lit", value)
        if kind == "name":
            self.i += 1
            if value in FUNCTIONS and self.take("("):
                args = [self.or_()]
                while self.take(","):
                    args.append(self.or_())
                if not self.take(")"):
                    raise ExprError(f"missing ')' after the arguments of {value}()")
                return ("call", value, tuple(args))
            return ("name", value)
        if self.take("("):
            inner = self.or_()
            if not self.take(")"):
                raise ExprError("missing ')'")
            return inner
        raise ExprError("unexpected end of expression" if kind == "end" else f"unexpected {value!r}")


def parse(text: str, known: set[str] | None = None) -> Expr:
    """Parse `text`; with `known`, every name must be one of them."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("expected a non-empty expression string")
    p = _Parser(_tokens(text))
    try:
        tree = p.or_()
    except RecursionError:
        raise ExprError("parentheses, 'not' or '-' nested too deeply") from None
    if p.i != len(p.toks):
        raise ExprError(f"unexpected {p.toks[p.i][1]!r} after a complete expression")
    names = frozenset(_names(tree))
    if known is not None and names - known:
        raise ExprError(f"unknown name(s) {', '.join(sorted(names - known))}; "
                        f"known: {', '.join(sorted(known))}")
    return Expr(text, tree, names)


def _names(tree):
    if tree[0] == "name":
        yield tree[1]
    elif tree[0] == "call":
        for sub in tree[2]:
            yield from _names(sub)
    elif tree[0] == "chain":
        yield from _names(tree[1])
        for _, sub in tree[2]:
            yield from _names(sub)
    elif tree[0] != "lit":
        for sub in tree[1:]:
            yield from _names(sub)


def _eval(tree, env):
    op = tree[0]
    if op == "lit":
        return tree[1]
    if op == "name":
        return env[tree[1]]
    if op == "neg":
        return -_eval(tree[1], env)
    if op == "not":
        return not _eval(tree[1], env)
    if op == "call":
        return FUNCTIONS[tree[1]](*(_eval(sub, env) for sub in tree[2]))
    if op == "chain":
        value = _eval(tree[1], env)
        for name, sub in tree[2]:
            if name == "and":
                value = bool(value) and bool(_eval(sub, env))
            elif name == "or":
                value = bool(value) or bool(_eval(sub, env))
            else:
                value = BINARY[name](value, _eval(sub, env))
        return value
    return BINARY[op](_eval(tree[1], env), _eval(tree[2], env))
