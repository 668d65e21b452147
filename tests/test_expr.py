"""The constraint language: what it computes, and everything that is not it being refused."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cltune.core.expr import ExprError, parse


@pytest.mark.parametrize("text, env, expected", [
    ("A * B <= 64", {"A": 8, "B": 8}, True),
    ("A * B <= 64", {"A": 8, "B": 9}, False),
    ("BLOCK % VEC == 0 and not SPLIT", {"BLOCK": 8, "VEC": 4, "SPLIT": 0}, True),
    ("1 + 2 * 3 - 4 / 2", {}, 5.0),
    ("-(1 + 2) * 3 % 4", {}, 3),
    ("X == 0 or Y > 2 and Z != 1", {"X": 1, "Y": 3, "Z": 1}, False),  # and binds tighter than or
    ("MATH == 'fma' or MATH == \"mad\"", {"MATH": "mad"}, True),
    ("(LWS_X == 0) == (LWS_Y == 0)", {"LWS_X": 0, "LWS_Y": 4}, False),
    ("not not 3 >= 3.5", {}, False),
    ("in_c % 4 == 0", {"in_c": 12}, True),
    # Kernel Tuner's restrictions and a user kernel's launch geometry need these too
    ("(N + B - 1) // B * B", {"N": 100, "B": 32}, 128),
    ("2 ** K ** 2", {"K": 2}, 16),  # right-associative, as in Python
    ("-2 ** 2", {}, -4),
    ("max(TX, 4) * min(2, TY) + ceil(N / 3) + floor(7 / 2) + abs(-1)", {"TX": 2, "TY": 8, "N": 10}, 16),
])
def test_evaluates_like_arithmetic(text, env, expected):
    assert parse(text)(env) == expected


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')",  # calls are not in the language, but for min/max/ceil/floor/abs
    "A.__class__",                       # attribute access
    "[A for A in B]", "print(A)", "max(A", "max A", "lambda: 1", "A if B else C", "A; B", "A = 1",
    "A < B < C",                         # chained comparison: ambiguous, refused
    "(A + 1", "A +", "", "   ", "A and", "1 2", "'unterminated",
])
def test_anything_outside_the_language_is_refused(text):
    with pytest.raises(ExprError):
        parse(text)


def test_unknown_names_are_refused_with_the_known_ones_listed():
    with pytest.raises(ExprError, match=r"unknown name\(s\) BLOK; known: BLOCK, VEC"):
        parse("BLOK * VEC <= 64", {"BLOCK", "VEC"})


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="AB01 +-*/%()=!<>andortx'\"._[]:", max_size=30))
def test_any_text_parses_or_raises_expr_error_only(text):
    try:
        parse(text)
    except ExprError:
        pass


def _exprs():
    leaf = st.one_of(st.integers(0, 20).map(str), st.sampled_from(["A", "B"]))
    return st.recursive(leaf, lambda sub: st.tuples(sub, st.sampled_from(["+", "-", "*", "%"]), sub)
                        .map(lambda t: f"({t[0]} {t[1]} {t[2]})"), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(_exprs(), st.integers(1, 9), st.integers(1, 9))
def test_arithmetic_agrees_with_python(text, a, b):
    env = {"A": a, "B": b}
    try:
        want = eval(text, {}, dict(env))  # the test's oracle only; the library never evals
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            parse(text)(env)
        return
    assert parse(text)(env) == want


def test_device_values_are_names_and_nothing_else_may_be_dotted():
    # device.* values read like attributes but are plain names looked up in the environment.
    e = parse("TM * TN <= (device.vector_registers - 4) * VW", {"TM", "TN", "VW", "device.vector_registers"})
    assert e.names == {"TM", "TN", "VW", "device.vector_registers"}
    assert e({"TM": 32, "TN": 6, "VW": 16, "device.vector_registers": 32})
    assert not e({"TM": 32, "TN": 6, "VW": 8, "device.vector_registers": 16})
    for text in ("A.__class__", "device.vector_width.real", "x.device"):
        with pytest.raises(ExprError):
            parse(text)


def test_a_huge_power_is_an_error_not_a_hang():
    """Guards against `2 ** 10 ** 9` in a config taking the machine's memory."""
    with pytest.raises(OverflowError):
        parse("2 ** 10 ** 9")({})
