"""opscope optimize on blocks written like public model code (tests/optimize_public.py): the
patterns found through the graph torch.compile captures when symbolic tracing fails, the
patches spelled with the call's own arguments, applied with ``patch -p1`` and ``git apply``
and run with randomised weights, the proof of a patch (and the refusal of a wrong one), the
traps and their near-misses, the targets and their one-line errors."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import optimize_public as P
from opscope.errors import OpscopeError, UsageError
from opscope.optimize.capture import DYNAMO, capture
from opscope.optimize.patch import make_patches
from opscope.optimize.patterns import REGISTRY, scan
from opscope.optimize.target import Target, load_target, parse_init_args
from opscope.optimize.verify import build_patched, fresh_inputs, perturbed_state, prove
from optimize_checks import load_module

PUBLIC = Path(P.__file__)
CASES = {
    "Block": (lambda m: m.make_block(), "block_inputs"),
    "LlamaRMSNorm": (lambda m: m.LlamaRMSNorm(), "block_inputs"),
    "TFStyleLayerNorm": (lambda m: m.TFStyleLayerNorm(), "block_inputs"),
    "MLP": (lambda m: m.MLP(), "block_inputs"),
    "CausalSelfAttention": (lambda m: m.CausalSelfAttention(), "block_inputs"),
    "BiasedAttention": (lambda m: m.BiasedAttention(), "qkv_inputs"),
}


@pytest.fixture
def copy_dir(tmp_path: Path) -> Path:
    """A folder holding a copy of the public blocks, to patch."""
    shutil.copy(PUBLIC, tmp_path / "blocks.py")
    return tmp_path


def _scan(target, args):
    cap = capture(target, args)
    assert not cap.error, cap.error
    matches, misses = [], []
    for g in cap.graphs:
        a, b = scan(g)
        matches += a
        misses += b
    return cap, matches, misses


def test_nanogpt_attention_is_found_through_the_compile_graph() -> None:
    cap, matches, _ = _scan(P.CausalSelfAttention(), P.block_inputs())
    assert cap.method == DYNAMO and "slice indices" in (cap.fx_error or "")
    assert [m.pattern for m in matches] == ["sdpa"]
    m = matches[0]
    assert m.args["is_causal"] is True and m.args["scale"] is None  # 1/sqrt(hs): the default
    assert m.args["dropout"] is not None
    diff = make_patches(matches, cap.nodes(), base=PUBLIC.parent).diff()
    assert diff is not None
    assert "F.scaled_dot_product_attention(" in diff
    assert "is_causal=True," in diff
    assert "dropout_p=self.attn_dropout.p if self.attn_dropout.training else 0.0," in diff
    assert "# manual implementation of attention" not in [
        line[1:].strip() for line in diff.splitlines() if line.startswith("-")
    ]  # the comment is kept
    assert diff.count("\n-            att = ") == 4


def test_the_shared_helper_spells_its_own_weight_parameter() -> None:
    cap, matches, _ = _scan(P.make_block(), P.block_inputs())
    assert sorted(m.pattern for m in matches) == ["gelu_tanh", "rms_norm", "rms_norm", "sdpa"]
    patches = make_patches(matches, cap.nodes())
    (h,) = [h for h in patches.hunks if h.pattern == "rms_norm"]
    assert h.matches == 2  # called with norm1_weight and norm2_weight: one edit
    assert h.call == "torch.rms_norm(x, (x.shape[-1],), weight, eps)"
    added = [line for line in (patches.diff(["rms_norm"]) or "").splitlines() if line[:1] == "+"]
    assert not any("norm1_weight" in line for line in added)


@pytest.mark.parametrize(
    ("cls", "call"),
    [
        (
            "LlamaRMSNorm",
            "torch.rms_norm(hidden_states, (hidden_states.shape[-1],), self.weight, "
            "self.variance_epsilon)",
        ),
        (
            "TFStyleLayerNorm",
            "F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.variance_epsilon)",
        ),
        ("MLP", 'F.gelu(x, approximate="tanh")'),
        ("BiasedAttention", "F.scaled_dot_product_attention(q, k, v, attn_mask=self.rel_bias)"),
    ],
)
def test_hf_and_gpt2_spellings(cls: str, call: str) -> None:
    build, inputs = CASES[cls]
    cap, matches, _ = _scan(build(P), getattr(P, inputs)())
    patches = make_patches(matches, cap.nodes())
    assert [h.call for h in patches.hunks] == [call], patches.problems


def _apply(diff: str, where: Path, tool: str) -> None:
    cmd = ["patch", "-p1", "--quiet"] if tool == "patch" else ["git", "apply", "-"]
    if tool == "git":
        subprocess.run(["git", "init", "-q"], cwd=where, check=True)
    out = subprocess.run(cmd, input=diff, text=True, cwd=where, capture_output=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("tool", ["patch", "git"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_printed_patch_applies_and_gives_the_originals_outputs(
    copy_dir: Path, name: str, tool: str
) -> None:
    """The diff, applied by patch -p1 / git apply to a copy, imports; with every weight
    perturbed (the same in both) the patched block gives the original's outputs."""
    orig_mod = load_module(copy_dir / "blocks.py", f"blocks_orig_{name}_{tool}")
    build, inputs = CASES[name]
    model = build(orig_mod)
    args = getattr(orig_mod, inputs)()
    cap, matches, _ = _scan(model, args)
    patches = make_patches(matches, cap.nodes(), base=copy_dir)
    assert patches.hunks, patches.problems
    state, n = perturbed_state(model, seed=3)
    assert n > 0
    model.load_state_dict(state)
    for patterns in [[p] for p in dict.fromkeys(h.pattern for h in patches.hunks)] + [None]:
        diff = patches.diff(patterns)
        assert diff and diff.startswith("--- a/blocks.py\n+++ b/blocks.py\n")
        work = copy_dir / f"applied-{'-'.join(patterns or ['all'])}"
        work.mkdir()
        shutil.copy(copy_dir / "blocks.py", work / "blocks.py")
        _apply(diff, work, tool)
        new_mod = load_module(work / "blocks.py", f"blocks_new_{name}_{tool}_{work.name}")
        patched = build(new_mod)
        patched.load_state_dict(state)
        for xs in (args, fresh_inputs(args, 5)):
            with torch.no_grad():
                torch.testing.assert_close(patched(*xs), model(*xs), rtol=1e-5, atol=1e-5)


def test_the_proof_refuses_a_patch_that_reads_the_wrong_weight(tmp_path: Path) -> None:
    """The bug this proof exists for: inside the helper, one attribute for both calls.  With
    the weights at ones it computes the same; with the weights perturbed it does not."""
    block = P.make_block()
    args = P.block_inputs()
    cap, matches, _ = _scan(block, args)
    patches = make_patches(matches, cap.nodes())
    (h,) = [h for h in patches.hunks if h.pattern == "rms_norm"]
    wrong = h.edits[-1].lines[0].replace(", weight, eps)", ", self.norm1_weight, eps)")
    assert wrong != h.edits[-1].lines[0]
    h.edits[-1].lines[0] = wrong
    patched = build_patched(Target.of(block), patches.texts(["rms_norm"]), tmp_path)
    with torch.no_grad():  # at ones the wrong patch hides
        torch.testing.assert_close(patched(*args), block(*args))
    check = prove(block, patched, args, {"rms_norm": 2})
    assert not check.verified
    assert "randomised parameters" in (check.reason or "")
    assert check.max_abs_err is not None and check.max_abs_err > 1e-3


def test_the_proof_needs_the_patched_lines_to_run(tmp_path: Path) -> None:
    """A model that is not built from the patched source computes the original's outputs:
    the counted built-in calls say the patch did not run."""
    block = P.make_block()
    args = P.block_inputs()
    check = prove(block, P.make_block(), args, {"rms_norm": 2})
    assert not check.verified and "did not run" in (check.reason or "")


def test_the_proof_of_a_right_patch(tmp_path: Path) -> None:
    block = P.make_block()
    args = P.block_inputs()
    cap, matches, _ = _scan(block, args)
    patches = make_patches(matches, cap.nodes())
    patched = build_patched(Target.of(block), patches.texts(), tmp_path)
    check = prove(block, patched, args, {"rms_norm": 2, "scaled_dot_product_attention": 1})
    assert check.verified, check.reason
    d = check.to_dict()
    assert d["inputs"] == 3 and d["params_randomised"] is True and d["parameters"] > 0
    assert d["builtin_calls"] == {"rms_norm": 2, "scaled_dot_product_attention": 1}
    # the patched model carries the original's weights back for the timing
    for (k, a), (_, b) in zip(
        block.state_dict().items(), patched.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), k


@pytest.mark.parametrize(
    ("cls", "pattern", "words"),
    [
        ("UnbiasedLayerNorm", "layer_norm", "unbiased"),
        ("EpsOutsideLayerNorm", "layer_norm", "outside the square root"),
        ("EpsOutsideRMSNorm", "rms_norm", "outside the square root"),
    ],
)
def test_traps_are_near_misses_never_matches(cls: str, pattern: str, words: str) -> None:
    _cap, matches, misses = _scan(getattr(P, cls)(), P.block_inputs())
    assert matches == []
    assert [(m.pattern, words in m.reason) for m in misses] == [(pattern, True)], misses


def test_a_mask_through_torch_where_is_a_near_miss_that_names_the_op() -> None:
    _cap, matches, misses = _scan(P.gpt2_attn, P.gpt2_inputs())
    assert matches == []
    (miss,) = misses
    assert miss.pattern == "sdpa" and miss.reason.startswith("where between q @ k^T")


def test_an_additive_bias_is_kept_and_proven(tmp_path: Path) -> None:
    """Dropping the bias would be wrong with any bias but zero: the proof perturbs it."""
    model, args = P.BiasedAttention(), P.qkv_inputs()
    cap, matches, _ = _scan(model, args)
    patches = make_patches(matches, cap.nodes())
    patched = build_patched(Target.of(model), patches.texts(), tmp_path)
    assert prove(model, patched, args, {"scaled_dot_product_attention": 1}).verified
    (h,) = patches.hunks
    h.edits[-1].lines[0] = h.edits[-1].lines[0].replace(", attn_mask=self.rel_bias", "")
    dropped = build_patched(Target.of(model), patches.texts(), tmp_path)
    check = prove(model, dropped, args, {"scaled_dot_product_attention": 1})
    assert not check.verified  # equal at the zero init, refused once the bias is perturbed


def test_a_reassigned_input_is_read_before_it_is_bound_again() -> None:
    cap, matches, _ = _scan(P.TFStyleLayerNorm(), P.block_inputs())
    diff = make_patches(matches, cap.nodes()).diff() or ""
    removed = [line for line in diff.splitlines() if line.startswith("-    ")]
    assert len(removed) == 4  # u, s, the reassignment and the return
    assert "+        return F.layer_norm(x, " in diff


def test_every_pattern_is_one_object_with_its_docs_row() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "optimize.md").read_text()
    for name, p in REGISTRY.items():
        assert p.name == name and callable(p.match) and callable(p.rewrite)
        assert callable(p.spell) and p.calls
        assert p.docs_row() in docs, f"docs/optimize.md lacks the row of {name}"


# -- targets ---------------------------------------------------------------------------------


def test_init_args_are_literals_of_a_call() -> None:
    assert parse_init_args("32, n_head=4") == ((32,), {"n_head": 4})
    assert parse_init_args(None) == ((), {})
    with pytest.raises(UsageError, match="only Python literals"):
        parse_init_args("n=foo")
    with pytest.raises(UsageError, match="not arguments of a call"):
        parse_init_args("n=")


def test_targets_classes_factories_and_their_errors(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "import torch\n\nclass Needs(torch.nn.Module):\n"
        "    def __init__(self, dim, scale=2.0):\n        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.ones(dim))\n\n"
        "    def forward(self, x):\n        return x * self.w\n\n"
        "def make(dim=4):\n    return Needs(dim)\n\n"
        "def broken():\n    raise ValueError('no GPU here')\n\n"
        "def gate(x):\n    return x * torch.sigmoid(x)\n",
        encoding="utf-8",
    )
    with pytest.raises(UsageError, match=r"Needs\(\) needs dim: pass --init-args 'dim=...'"):
        load_target(f"{f}:Needs")
    t, _ = load_target(f"{f}:Needs", "dim=8")
    assert t.is_module and t.build == "Needs(dim=8)" and t.obj.w.shape == (8,)
    assert t.compile_target() == "Needs(dim=8)"
    t, _ = load_target(f"{f}:make")
    assert t.is_module and t.build == "make()" and t.builder.__name__ == "make"
    t, _ = load_target(f"{f}:make", "16")
    assert t.build == "make(16)" and t.obj.w.shape == (16,)
    with pytest.raises(OpscopeError, match=r"broken\(\) returned|broken\(\) failed: ValueError"):
        load_target(f"{f}:broken")
    t, _ = load_target(f"{f}:gate")
    assert not t.is_module and t.compile_target() == "gate"
    with pytest.raises(OpscopeError, match=r"gate\(1\) failed: TypeError"):
        load_target(f"{f}:gate", "1")  # called as a factory with the arguments given


def test_a_hunk_that_overlaps_one_before_it_is_not_chosen(tmp_path: Path) -> None:
    """What is proven is what is applied: a hunk :func:`apply_hunks` skips is not among the
    chosen ones (its built-in calls are not expected of the patched source)."""
    from opscope.optimize.patch import PatchSet
    from opscope.optimize.spell import Edit, Hunk

    f = tmp_path / "m.py"
    f.write_text("a = 1\nb = 2\nc = 3\n", encoding="utf-8")
    first = Hunk(str(f), "rms_norm", [Edit(1, 2, ["ab = 12"])])
    second = Hunk(str(f), "gelu_tanh", [Edit(2, 3, ["bc = 23"])])
    apart = Hunk(str(tmp_path / "other.py"), "silu", [Edit(2, 3, ["x = 0"])])
    ps = PatchSet(hunks=[first, second, apart], base=tmp_path)
    assert ps.chosen() == [first, apart]
    assert ps.chosen(["gelu_tanh"]) == [second]  # alone it is applied
    assert ps.texts(["rms_norm", "gelu_tanh"]) == {str(f): "ab = 12\nc = 3\n"}
