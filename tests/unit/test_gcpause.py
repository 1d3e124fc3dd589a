"""The cyclic collector paused while acyclic rows are built (``trace.gcpause``), and the
report dict's ``plain`` copy."""

from __future__ import annotations

import gc
from collections import UserList
from collections.abc import Iterator

import numpy as np
import pytest

from opscope.analysis.critical.path import Pieces, Segments, plain
from opscope.trace.gcpause import collector_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: the outer block turns it back on, not this one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_comes_back_after_an_error() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_as_a_decorator_each_call_pauses_it() -> None:
    seen: list[bool] = []

    @collector_paused()
    def work() -> None:
        seen.append(gc.isenabled())

    work()
    work()
    assert seen == [False, False]
    assert gc.isenabled()


class _Dict(dict):  # type: ignore[type-arg]
    pass


def test_plain_copies_containers_as_plain_ones_and_keeps_the_rest() -> None:
    class _Index:  # what Pieces.dicts reads: ids and name codes/values
        ids = np.array([10, 11])

        class name:
            codes = np.array([0, 1])
            values = np.array(["a", "b"], dtype=object)

    seg = Segments(
        Pieces(
            np.array([0, 0]),
            np.array([0, 1]),
            np.array([1, -1]),
            np.array([5, 9]),
            np.array([1000, 2500]),
        ),
        _Index(),  # type: ignore[arg-type]
    )
    inner = _Dict(x=[1, 2.5, None, True, "s"])
    data = {"a": inner, "b": UserList([1, {"c": seg}]), "t": (1, 2), "n": 3, "l": [inner, [seg]]}
    out = plain(data)
    assert type(out["a"]) is dict and out["a"] == {"x": [1, 2.5, None, True, "s"]}
    assert out["a"] is not inner and out["a"]["x"] is not inner["x"]
    assert out["b"] == UserList([1, {"c": seg}])  # not a list subclass: kept as it is
    assert out["t"] == (1, 2) and out["n"] == 3
    (segs,) = out["l"][1]
    assert type(segs) is list
    assert [s["dur_us"] for s in segs] == [1.0, 2.5]
    assert segs[0]["name"] == "b" and segs[1]["name"] is None
    assert type(out["l"][0]) is dict


def test_plain_turns_list_subclasses_into_lists() -> None:
    class _List(list):  # type: ignore[type-arg]
        pass

    out = plain({"k": _List([_Dict(a=1)])})
    assert type(out["k"]) is list and type(out["k"][0]) is dict
    assert out == {"k": [{"a": 1}]}
