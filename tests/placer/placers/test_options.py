"""Placer options read from signatures: listing, conversion and refusal."""

from __future__ import annotations

from typing import Annotated, Callable, Literal

import numpy as np
import pytest

from placer.errors import PlacerError
from placer.placers import registry
from placer.placers.options import Option, signature_options


def _placer(graph, cluster, *,
            seconds: Annotated[float, Option("how long", gt=0)] = 3.0,
            seed: Annotated[int, Option("seed", ge=0)] = 0,
            starts: Annotated[int, Option("starts", ge=1, le=8)] = 1,
            flag: Annotated[bool, Option("a flag")] = False,
            mode: Annotated[Literal["a", "b"], Option("the mode")] = "a",
            limit: Annotated[float | None, Option("a limit; none by default", ge=0)] = None,
            on_step: Callable | None = None):
    return None


def _info() -> registry.PlacerInfo:
    specs, hooks = signature_options(_placer)
    return registry.PlacerInfo("toy", _placer, "a toy", option_specs=specs, hooks=hooks)


class TestSignatureOptions:
    def test_options_and_hooks(self):
        """Annotated keyword-only parameters are options, in signature order; the others are hooks."""
        info = _info()
        assert list(info.options) == ["seconds", "seed", "starts", "flag", "mode", "limit"]
        assert info.hooks == {"on_step"}

    def test_docs_say_the_default_as_users_write_it(self):
        docs = _info().options
        assert docs["seconds"] == "how long (default 3)"
        assert docs["flag"] == "a flag (default false)"
        assert docs["mode"] == "the mode (default 'a')"
        assert docs["limit"] == "a limit; none by default"

    @pytest.mark.parametrize("fn", [
        lambda graph, cluster, x=1: None,
        lambda graph, cluster, *, x: None,
        lambda g, cluster: None,
        lambda graph, cluster, **options: None,
    ])
    def test_malformed_placers_are_refused(self, fn):
        with pytest.raises(TypeError):
            signature_options(fn)

    def test_unsupported_type_is_refused(self):
        def fn(graph, cluster, *, x: Annotated[list, Option("x")] = None):
            return None

        with pytest.raises(TypeError, match="type must be"):
            signature_options(fn)


class TestCheckOptions:
    def test_values_are_converted(self):
        out = _info().check_options({"seconds": 2, "seed": 4.0, "flag": np.bool_(True), "limit": None})
        assert out == {"seconds": 2.0, "seed": 4, "flag": True, "limit": None}
        assert type(out["seconds"]) is float and type(out["seed"]) is int

    @pytest.mark.parametrize("options, message", [
        ({"bogus": 1}, "unknown option\\(s\\) bogus; it takes seconds, seed, starts, flag, mode, limit"),
        ({"on_step": print}, "unknown option\\(s\\) on_step"),
        ({"seconds": 0}, "option seconds must be a positive number, got 0"),
        ({"seconds": float("inf")}, "option seconds must be a finite number, got inf"),
        ({"seconds": "3"}, "option seconds must be a positive number, got '3'"),
        ({"seconds": True}, "option seconds must be a positive number"),
        ({"seed": 1.5}, "option seed must be a non-negative integer, got 1.5"),
        ({"seed": -1}, "option seed must be a non-negative integer"),
        ({"seed": [1]}, "option seed must be a non-negative integer"),
        ({"starts": 9}, "option starts must be an integer from 1 to 8, got 9"),
        ({"flag": "false"}, "option flag must be true or false, got 'false'"),
        ({"flag": 1}, "option flag must be true or false"),
        ({"mode": "c"}, "option mode must be one of 'a', 'b', got 'c'"),
        ({"limit": -1}, "option limit must be a non-negative number"),
    ])
    def test_bad_options_are_refused_in_one_line(self, options, message):
        with pytest.raises(PlacerError, match="^method 'toy': " + message):
            _info().check_options(options)

    def test_huge_numbers_are_numbers(self):
        """A JSON integer past a float's range is an int option's value (or its bound's refusal), never a crash."""
        assert _info().check_options({"seed": 10**400}) == {"seed": 10**400}
        for seconds in (-10**400, 10**400):
            with pytest.raises(PlacerError, match="option seconds must be a positive number"):
                _info().check_options({"seconds": seconds})

    def test_hooks_pass_for_python_callers(self):
        assert _info().check_options({"on_step": print}, hooks=True) == {"on_step": print}


def test_registered_placers_list_typed_options():
    """Options come from the placers' signatures: m_sct's LP limit is a non-negative number of seconds."""
    m_sct = registry.get("m_sct")
    assert list(m_sct.options) == ["lp_time_limit", "follow_forward", "time_limit"]
    assert m_sct.options["lp_time_limit"].endswith("(default 60)")
    assert m_sct.check_options({"lp_time_limit": 0}) == {"lp_time_limit": 0.0}
    assert list(registry.get("heft").options) == ["time_limit"]
    assert registry.get("metis").options == {}
