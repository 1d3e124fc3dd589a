"""The one ``args`` decoder."""

from __future__ import annotations

from opscope.trace.args import decode_args


def test_objects_separators_and_junk() -> None:
    assert decode_args('{"a": 1}') == {"a": 1}
    assert decode_args(', {"a": 1}') == {"a": 1}  # a stray separator before the object
    assert decode_args(None) == {} and decode_args("") == {}
    assert decode_args("[1, 2]") == {}
    assert decode_args("{bad") == {}
    assert decode_args("{bad", keep_raw=True) == {"raw": "{bad"}
    assert decode_args("3", keep_raw=True) == {"raw": "3"}
