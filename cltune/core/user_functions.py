"""A user's function inside a problem (a kernel source generator, a problem size or grid divisor
given as a function of the knobs, a `verify`): it travels with the problem to the worker process
that measures, by value with cloudpickle where that is installed (so a lambda or a function defined
inside another one works), else by reference (a module-level function)."""

from __future__ import annotations

import hashlib
import inspect
import pickle

import numpy as np

from .errors import UserError


class UserFunction:
    """`fn`, called with the knob dict (or verify's arguments). With `part` (0, 1, 2): one dimension
    of what it returns (an int, or a tuple of 1-3 of them; 1 for a dimension it does not give)."""

    def __init__(self, fn, what: str, part: int | None = None):
        self.fn, self.what, self.part = fn, what, part
        self.__name__ = getattr(fn, "__name__", what)
        try:  # what inspect.signature reports: the user's own (whether verify takes atol)
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass

    def __call__(self, *args, **kwargs):
        value = self.fn(*args, **kwargs)
        if self.part is None:
            return value
        return dimension(value, self.part, self.what)

    def __reduce__(self):
        try:
            import cloudpickle  # cloudpickle: only for a user's function
        except ImportError:
            return (UserFunction, (self.fn, self.what, self.part))
        return (_loads, (cloudpickle.dumps(self.fn), self.what, self.part))

    def __str__(self) -> str:  # what a problem's key hashes (json.dumps(default=str)): its code
        return function_text(self.fn)

    def __repr__(self) -> str:
        return f"UserFunction({getattr(self.fn, '__qualname__', self.fn)!r}, {self.what!r})"


def _loads(data: bytes, what: str, part):
    return UserFunction(pickle.loads(data), what, part)


def dimension(value, part: int, what: str) -> int:
    """Dimension `part` of a size a function returned: an int, or a tuple/list of 1 to 3 ints
    (numpy ints taken); a dimension it does not give is 1."""
    sizes = tuple(value) if isinstance(value, (tuple, list, np.ndarray)) else (value,)
    if not 1 <= len(sizes) <= 3 or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool)
                                            for s in sizes):
        raise ValueError(f"{what} returned {value!r}, not an int or a tuple of 1 to 3 ints")
    return int(sizes[part]) if part < len(sizes) else 1


def shippable(fn, what: str) -> UserFunction:
    """`fn` wrapped to travel to a worker process; one line naming `what` when it cannot."""
    if not callable(fn):
        raise UserError(f"{what}: expected a function, got {type(fn).__name__}")
    wrapped = fn if isinstance(fn, UserFunction) else UserFunction(fn, what)
    try:
        pickle.dumps(wrapped)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise UserError(f"{what}: {getattr(fn, '__qualname__', fn)!r} cannot be sent to the worker process "
                        f"({type(exc).__name__}); define it at module level, or install cloudpickle") from None
    return wrapped


def function_text(fn) -> str:
    """What identifies a user's function in a problem's key: its source where Python has it, else
    its qualified name, and the values it closes over (a changed generator is a changed kernel)."""
    if fn is None:
        return ""
    fn = getattr(fn, "fn", fn)
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    try:
        cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())]
    except ValueError:  # a cell not yet filled
        cells = []
    bound = [*cells, *(getattr(fn, "__defaults__", None) or ())]
    return text + (f" with {[_stable(v) for v in bound]}" if bound else "")


def _stable(value) -> str:
    """A value as the same text in every run (no memory addresses): plain values and containers of
    them as written, arrays by a hash of their contents, anything else by its type."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_stable(v) for v in value]
        return f"{type(value).__name__}[{', '.join(sorted(items) if isinstance(value, (set, frozenset)) else items)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_stable(k)}: {_stable(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        return f"array {arr.dtype} {arr.shape} {hashlib.sha1(np.ascontiguousarray(arr).tobytes()).hexdigest()[:12]}"
    return f"<{type(value).__module__}.{getattr(value, '__qualname__', type(value).__qualname__)}>"
