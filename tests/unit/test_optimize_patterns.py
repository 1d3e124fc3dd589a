"""opscope optimize, without compiling: graph capture, the pattern matchers and their guards,
the FX rewrites (numerics against the original), the source patches and --write."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch

import optimize_models as M
from opscope.optimize.capture import DYNAMO, capture
from opscope.optimize.patch import make_patches, write_patched
from opscope.optimize.patterns import find_matches
from opscope.optimize.rewrite import apply_rewrites, check

MODELS = Path(M.__file__)


def _matches(target, inputs):
    cap = capture(target, inputs)
    assert cap.gm is not None, cap.error
    return cap, find_matches(cap.gm)


@pytest.mark.parametrize(
    ("target", "inputs", "pattern"),
    [
        (M.rms_function, M.rms_inputs, "rms_norm"),
        (M.LlamaRMSNorm, M.x_inputs, "rms_norm"),
        (M.NoWeightRMS, M.x_inputs, "rms_norm"),
        (M.HandLayerNorm, M.x_inputs, "layer_norm"),
        (M.attention, M.attention_inputs, "sdpa"),
        (M.masked_attention, M.masked_inputs, "sdpa"),
        (M.gelu_tanh, M.x_inputs, "gelu_tanh"),
    ],
)
def test_each_pattern_alone_is_found_and_the_rewrite_matches(target, inputs, pattern) -> None:
    if isinstance(target, type):
        target = target()
    args = inputs()
    cap, ms = _matches(target, args)
    assert [m.pattern for m in ms] == [pattern]
    new = apply_rewrites(cap.gm, ms)
    assert check(target, new, args)["ok"]
    # the unfused ops are gone: fewer nodes calling anything
    calls = [n for n in new.graph.nodes if n.op in ("call_function", "call_method")]
    before = [n for n in cap.gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert len(calls) < len(before)
    assert ms[0].locations and all(
        loc.file.endswith("optimize_models.py") for loc in ms[0].locations
    )


def test_mixed_block_all_patterns_together() -> None:
    block, args = M.Block(), M.x_inputs()
    cap, ms = _matches(block, args)
    assert [m.pattern for m in ms] == ["rms_norm", "linear", "gelu_tanh", "silu"]
    new = apply_rewrites(cap.gm, ms)
    assert check(block, new, args)["ok"]
    targets = {getattr(n.target, "__name__", str(n.target)) for n in new.graph.nodes}
    assert {"rms_norm", "linear", "gelu", "silu"} <= targets
    assert not targets & {"tanh", "sigmoid", "rsqrt", "matmul"}


def test_lambdas_in_sequential_match_but_get_no_patch() -> None:
    seq, args = M.swish_mlp(), M.x_inputs()
    cap, ms = _matches(seq, args)
    assert sorted(m.pattern for m in ms) == ["linear", "silu"]
    assert check(seq, apply_rewrites(cap.gm, ms), args)["ok"]
    patches = make_patches(ms, list(cap.gm.graph.nodes))
    assert not patches.hunks
    assert all("lambda" in why for _, why in patches.problems)


@pytest.mark.parametrize(
    ("target", "inputs"),
    [(M.ColumnNorm(), M.x_inputs), (M.masked_attention, M.wide_mask_inputs)],
    ids=["norm-over-dim-0", "mask-that-grows-the-scores"],
)
def test_guards_refuse_what_the_builtin_cannot_compute(target, inputs) -> None:
    _cap, ms = _matches(target, inputs())
    assert ms == []


def test_softmax_over_another_dim_is_not_attention() -> None:
    def f(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v

    _cap, ms = _matches(f, M.attention_inputs())
    assert ms == []


def test_a_target_that_does_not_trace_falls_back_to_the_compile_graph() -> None:
    cap = capture(M.Branchy(), M.x_inputs(), fallback=False)
    assert cap.gm is None
    assert "does not trace" in (cap.error or "")
    cap = capture(M.Branchy(), M.x_inputs())
    assert cap.error is None and cap.method == DYNAMO and cap.graphs
    assert "does not trace" in (cap.fx_error or "")
    found = [m.pattern for g in cap.graphs for m in find_matches(g)]
    assert found == ["silu"]  # in the branch Dynamo took


def test_patch_of_the_function_replaces_its_lines() -> None:
    cap, ms = _matches(M.rms_function, M.rms_inputs())
    diff = make_patches(ms, list(cap.gm.graph.nodes)).diff()
    assert diff is not None
    assert "+    return torch.rms_norm(x, (x.shape[-1],), weight, eps)" in diff
    assert diff.count("\n-    ") == 3  # the three statements


def test_patch_of_a_module_spells_its_parameters() -> None:
    cap, ms = _matches(M.HandLayerNorm(), M.x_inputs())
    diff = make_patches(ms, list(cap.gm.graph.nodes)).diff()
    assert diff is not None
    assert "F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)" in diff


def test_written_patch_runs_and_computes_the_same(tmp_path: Path) -> None:
    copy = tmp_path / "models_copy.py"
    shutil.copy(MODELS, copy)
    spec = importlib.util.spec_from_file_location("models_copy", copy)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    block, args = mod.Block(), mod.x_inputs()
    want = block(*args)
    cap, ms = _matches(block, args)
    patches = make_patches(ms, list(cap.gm.graph.nodes))
    assert len(patches.hunks) == 4, patches.problems
    backup = write_patched(copy, patches.hunks)
    assert backup.read_text() == MODELS.read_text()
    text = copy.read_text()
    assert (
        "F.silu(g)" in text and "torch.tanh" not in text.split("class Block")[1].split("class")[0]
    )
    spec2 = importlib.util.spec_from_file_location("models_patched", copy)
    assert spec2 and spec2.loader
    patched = importlib.util.module_from_spec(spec2)
    spec2.loader.exec_module(patched)
    got = patched.Block()(*args)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
