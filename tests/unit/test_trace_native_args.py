"""The C pass that cuts top-level values out of ``args`` texts (``_args.c``): wherever it is
sure, it gives what orjson decodes and writes back; where it is not, it says so."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pyarrow as pa
import pytest
from test_trace_index import SHAPE_TEXTS  # same folder (rootdir on sys.path)

from opscope.trace import native

pytestmark = pytest.mark.skipif(native._args is None, reason="the C extension is not built")

KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def _reference(text: str | None, key: str) -> str | None:
    if not text:
        return None
    try:
        d = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(d, dict) or key not in d:
        return None
    return orjson.dumps(d[key]).decode()


def _check(texts: list[str | None]) -> np.ndarray:
    got = native.top_values(pa.array(texts, pa.string()), None, KEYS)
    assert got is not None
    unsure, values = got
    cols = [v.to_pylist() for v in values]
    for i, text in enumerate(texts):
        if unsure[i]:
            assert all(c[i] is None for c in cols)
            continue
        for key, col in zip(KEYS, cols, strict=True):
            assert col[i] == _reference(text, key), (text, key)
            # sure also means: a text search for the quoted key finds only the top-level key
            quoted = f'"{key}"'
            assert (text or "").count(quoted) == (col[i] is not None), (text, key)
    return unsure


def test_sure_values_are_what_orjson_writes() -> None:
    unsure = _check(SHAPE_TEXTS)
    plain = [SHAPE_TEXTS.index(t) for t in SHAPE_TEXTS[3:8]]
    assert not unsure[plain].any()
    for doubtful in (
        '{"Input Dims":[[1]],"Input type":["float"],"big":1e400}',
        '{"Input Dims":[[1]],"Input Dims":[[2]],"Input type":["float"]}',
        '{"name":"Input Dims","Input type":["float"]}',
        '{"inner":{"Input Dims":[[9]]},"Input type":["float"]}',
        ', {"Input Dims":[[1]],"Input type":["float"]}',
    ):
        assert unsure[SHAPE_TEXTS.index(doubtful)], doubtful


def test_mask_nulls_and_slices() -> None:
    texts = pa.array(['{"Input Dims":[[1]]}', None, '{"Input Dims":[[2]]}', "{}"], pa.string())
    got = native.top_values(texts.slice(1), np.array([True, False, True]), KEYS)
    assert got is not None
    unsure, values = got
    assert not unsure.any()
    assert values[0].to_pylist() == [None, None, None]
    got = native.top_values(texts.slice(1), None, KEYS)
    assert got is not None
    assert got[1][0].to_pylist() == [None, "[[2]]", None]


def _random_value(rng: random.Random, depth: int = 0) -> object:
    pick = rng.random()
    if depth > 3 or pick < 0.3:
        return rng.choice([0, 7, 12345678901234567890, -3, 1.5, "", "x", "Input Dims", True, None])
    if pick < 0.6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick < 0.8:
        return [[rng.randrange(4096) for _ in range(rng.randrange(3))] for _ in range(3)]
    if pick < 0.9:
        return [rng.choice(["float", "c10::BFloat16", "", 'q"uote', "é"]) for _ in range(3)]
    return {rng.choice([*KEYS, "a"]): _random_value(rng, depth + 1)}


def test_generated_objects() -> None:
    rng = random.Random(7)
    texts: list[str | None] = []
    for _ in range(3000):
        obj = {
            k: _random_value(rng)
            for k in rng.sample([*KEYS, "External id", "name"], rng.randrange(6))
        }
        text = orjson.dumps(obj).decode()
        if rng.random() < 0.1:
            text = text.replace(":", ": ", 1)  # whitespace: not compact
        if rng.random() < 0.05:
            text = text[:-1] + ',"Input Dims":[[1]]}' if len(text) > 2 else text
        texts.append(text)
    unsure = _check(texts)
    assert 0.2 < unsure.mean() < 0.9  # both ways are exercised


def test_arg_values_the_same_with_and_without_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from opscope.trace.argtexts import arg_values

    rng = random.Random(3)
    plain = [
        orjson.dumps(
            {
                "Input Dims": [[rng.randrange(64), 3], []],
                "Input type": ["float", "Scalar"],
                "Input Strides": [[3, 1], []],
                "Concrete Inputs": ["", str(rng.randrange(3))],
            }
        ).decode()
        for _ in range(50)
    ]
    texts = pa.array(SHAPE_TEXTS + plain, pa.string())
    rows = np.array([i % 7 != 3 for i in range(len(texts))])
    fast = arg_values(texts, rows)
    monkeypatch.setattr(native, "top_values", lambda *a: None)
    slow = arg_values(texts, rows)
    assert fast.has.tolist() == slow.has.tolist()
    for name in ("dims", "types"):
        got, want = getattr(fast, name), getattr(slow, name)
        assert got.cast(pa.string()).to_pylist() == want.cast(pa.string()).to_pylist(), name
    tail = slice(len(SHAPE_TEXTS), None)
    for name in ("strides", "concrete"):
        got, want = getattr(fast, name), getattr(slow, name)
        assert got.cast(pa.string()).to_pylist()[tail] == want.cast(pa.string()).to_pylist()[tail]
