"""Placer options, typed in the placer's own signature.

A placer is ``fn(graph, cluster, *, name: Annotated[T, Option("what it does", ...)] = default, ...)``:
each keyword-only parameter annotated with an `Option` is an option users may give (``GET /v1/placers``
lists it, the service and the registry check it); any other keyword-only parameter is for Python callers
only (rl's ``on_step`` callback) and is refused from users. Name, type, default and the one-line doc all
come from the signature, so the placer, its listing and its checks cannot drift apart.

Types: ``bool``, ``int``, ``float``, ``str``, a ``Literal`` of strings, each optionally ``| None``.
An ``int`` option takes a whole float (``40000.0`` from JSON) and gets an ``int``; numbers must be
finite; bounds (`Option.gt`, `Option.ge`, `Option.le`) are checked with a message that names them.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from placer.errors import PlacerError


@dataclass(frozen=True)
class Option:
    """What a placer option does, and the range of its values.

    Attributes
    ----------
    doc : one line for ``GET /v1/placers`` and the docs; the default is appended (``(default 60)``)
        unless it is None, in which case `doc` says what leaving the option out means.
    gt, ge, le : bounds of a number option (greater than, at least, at most).
    """

    doc: str
    gt: float | None = None
    ge: float | None = None
    le: float | None = None


@dataclass(frozen=True)
class OptionSpec:
    """One option as the registry knows it, read from a placer's signature.

    Attributes
    ----------
    name : the keyword.
    kind : ``bool``, ``int``, ``float`` or ``str``.
    choices : the allowed strings of a ``Literal`` option (else empty).
    optional : None is an allowed value.
    default : the parameter's default.
    option : the `Option` metadata (doc and bounds).
    """

    name: str
    kind: type
    choices: tuple[str, ...]
    optional: bool
    default: Any
    option: Option

    @property
    def doc(self) -> str:
        """The one-line doc with the default, as ``GET /v1/placers`` lists it."""
        if self.default is None:
            return self.option.doc
        return f"{self.option.doc} (default {_spell(self.default)})"

    def check(self, method: str, value: Any) -> Any:
        """`value` converted to the option's type, or a `PlacerError` naming the method, the option and
        what it must be."""
        if value is None and self.optional:
            return None
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return value
            return self._refuse(method, value, f"one of {', '.join(map(repr, self.choices))}")
        if self.kind is bool:
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            return self._refuse(method, value, "true or false")  # "false" would be truthy
        if self.kind is str:
            if isinstance(value, str) and value:
                return value
            return self._refuse(method, value, "a non-empty string")
        if isinstance(value, float) and not math.isfinite(value):  # "a positive number, got inf" reads wrong
            return self._refuse(method, value, "a finite number")
        if not _is_number(value, integral=self.kind is int) or not self._in_range(value):
            return self._refuse(method, value, self._range())
        return self.kind(value)

    def _in_range(self, value: float) -> bool:
        o = self.option
        return ((o.gt is None or value > o.gt) and (o.ge is None or value >= o.ge)
                and (o.le is None or value <= o.le))

    def _range(self) -> str:
        """What a number option must be: ``a positive integer``, ``an integer from 1 to 8`` ..."""
        o, what = self.option, "integer" if self.kind is int else "number"
        if o.le is not None and (o.ge is not None or o.gt is not None):
            low = _spell(o.ge) if o.ge is not None else f"over {_spell(o.gt)}"
            return f"{'an' if what == 'integer' else 'a'} {what} from {low} to {_spell(o.le)}"
        if o.le is not None:
            return f"a {what} of at most {_spell(o.le)}"
        if o.gt == 0 or (o.ge == 1 and self.kind is int):
            return f"a positive {what}"
        if o.ge == 0:
            return f"a non-negative {what}"
        if o.gt is not None:
            return f"a {what} over {_spell(o.gt)}"
        if o.ge is not None:
            return f"a {what} of at least {_spell(o.ge)}"
        return f"a finite {what}" if what == "number" else "an integer"

    def _refuse(self, method: str, value: Any, must: str):
        raise PlacerError(f"method {method!r}: option {self.name} must be {must}, got {value!r}")


def _is_number(value: Any, integral: bool) -> bool:
    """`value` is a finite number (not a bool), and a whole one if `integral` (an int of any size, or a
    float such as ``4.0``); a float option's int must fit a float."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, np.integer)):
        try:
            return integral or math.isfinite(float(value))
        except OverflowError:  # 10**400 from JSON
            return False
    if not isinstance(value, (float, np.floating)) or not math.isfinite(value):
        return False
    return not integral or value == int(value)


def _spell(value: Any) -> str:
    """A default or bound as a user writes it: JSON's ``true``, ``3`` for ``3.0``, strings quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def signature_options(fn: Callable) -> tuple[tuple[OptionSpec, ...], frozenset[str]]:
    """The user options of placer `fn` and the names of its other keyword-only parameters (for Python
    callers only).

    Raises
    ------
    TypeError
        If `fn` does not take ``(graph, cluster, *, ...)``, a keyword-only parameter has no default, or an
        option's type is not one this module checks (a placer bug, found when it registers).
    """
    where = f"placer {fn.__module__}.{fn.__qualname__}"
    params = list(inspect.signature(fn).parameters.values())
    if [p.name for p in params[:2]] != ["graph", "cluster"] or any(
            p.kind is not p.POSITIONAL_OR_KEYWORD for p in params[:2]):
        raise TypeError(f"{where} must take (graph, cluster, *, options...)")
    hints = typing.get_type_hints(fn, include_extras=True)
    specs: list[OptionSpec] = []
    others: set[str] = set()
    for p in params[2:]:
        if p.kind is not p.KEYWORD_ONLY or p.default is p.empty:
            raise TypeError(f"{where}: parameter {p.name} must be keyword-only with a default")
        hint = hints.get(p.name)
        meta = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Option)]
        if not meta:
            others.add(p.name)
            continue
        kind, choices, optional = _parse_type(typing.get_args(hint)[0], f"{where}: option {p.name}")
        specs.append(OptionSpec(p.name, kind, choices, optional, p.default, meta[0]))
    return tuple(specs), frozenset(others)


def _parse_type(tp: Any, where: str) -> tuple[type, tuple[str, ...], bool]:
    """``(kind, choices, optional)`` of an option's annotated type."""
    optional = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        if len(args) != 1:
            raise TypeError(f"{where}: one type (or it | None), not {tp!r}")
        tp = args[0]
    if typing.get_origin(tp) is Literal:
        choices = typing.get_args(tp)
        if not all(isinstance(c, str) for c in choices):
            raise TypeError(f"{where}: Literal options take strings")
        return str, choices, optional
    if tp not in (bool, int, float, str):
        raise TypeError(f"{where}: type must be bool, int, float, str or a Literal of strings, not {tp!r}")
    return tp, (), optional
