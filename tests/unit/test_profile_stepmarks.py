"""Step marking for `opscope profile`: --step-fn parsing, source decoration, wrappers, the
optimizer marker and opscope.step()."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from opscope.capture import active
from opscope.capture.stepmarks import (
    DECORATOR_GLOBAL,
    OptimizerSteps,
    PostImportPatch,
    StepFnTarget,
    decorate_in_tree,
    wrap_in_module,
    wrap_step_fn,
)
from opscope.errors import OpscopeError


class Marks:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def __call__(self, source: str, owner: object) -> None:
        self.seen.append((source, owner))


@pytest.mark.parametrize(
    ("text", "where", "qualname", "is_path"),
    [
        ("train:train_step", "train", "train_step", False),
        ("pkg.mod:Model.forward", "pkg.mod", "Model.forward", False),
        ("./infer.py:run", "./infer.py", "run", True),
        ("infer.py:main.<locals>.inner", "infer.py", "main.<locals>.inner", True),
        ("/abs/dir/x.py:f", "/abs/dir/x.py", "f", True),
    ],
)
def test_step_fn_target_parse(text: str, where: str, qualname: str, is_path: bool) -> None:
    t = StepFnTarget.parse(text)
    assert (t.where, t.qualname, t.is_path) == (where, qualname, is_path)


@pytest.mark.parametrize(
    "text", ["train", "train:", ":f", "train:f-g", "bad mod:f", "x.py:a.<locals>", "m:1f"]
)
def test_step_fn_target_rejects(text: str) -> None:
    with pytest.raises(OpscopeError, match="expected MODULE:FUNCTION"):
        StepFnTarget.parse(text)


def test_is_main(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("")
    t = StepFnTarget.parse(f"{script}:f")
    assert t.is_main(script.resolve(), None)
    assert not t.is_main(tmp_path / "other.py", None)
    m = StepFnTarget.parse("app.__main__:f")
    assert m.is_main(None, "app.__main__") and not m.is_main(None, "app")
    assert StepFnTarget.parse("__main__:f").is_main(None, None)


SOURCE = """
import functools

def step(x):
    return x + 1

class Model:
    def forward(self, x):
        return x * 2

    @staticmethod
    def helper(x):
        return x - 1

def main():
    def inner(x):
        return x * 10
    return [inner(i) for i in range(3)]

if True:
    def guarded(x):
        return x

compiled = functools.partial(step)
"""


def run_decorated(qualname: str, marks: Marks) -> dict[str, Any]:
    tree = ast.parse(SOURCE)
    assert decorate_in_tree(tree, qualname) >= 1
    ns: dict[str, Any] = {DECORATOR_GLOBAL: lambda fn: wrap_step_fn(fn, marks)}
    exec(compile(tree, "<test>", "exec"), ns)
    return ns


def test_decorate_module_function_class_method_nested_and_assignment() -> None:
    marks = Marks()
    ns = run_decorated("step", marks)
    assert ns["step"](1) == 2 and ns["step"](2) == 3
    assert len(marks.seen) == 2 and marks.seen[0][0] == "step_fn"
    assert ns["step"].__name__ == "step"  # functools.wraps keeps the name

    marks = Marks()
    ns = run_decorated("Model.forward", marks)
    assert ns["Model"]().forward(3) == 6 and len(marks.seen) == 1

    marks = Marks()
    ns = run_decorated("Model.helper", marks)  # staticmethod: outermost decorator wraps it
    assert ns["Model"].helper(3) == 2 and ns["Model"]().helper(1) == 0
    assert len(marks.seen) == 2

    marks = Marks()
    ns = run_decorated("main.<locals>.inner", marks)
    assert ns["main"]() == [0, 10, 20] and len(marks.seen) == 3

    marks = Marks()
    ns = run_decorated("guarded", marks)  # defined inside an `if`
    ns["guarded"](1)
    assert len(marks.seen) == 1

    marks = Marks()
    ns = run_decorated("compiled", marks)  # `name = …` gets rebound right after
    assert ns["compiled"](4) == 5 and len(marks.seen) == 1


def test_decorate_missing_name_and_async() -> None:
    tree = ast.parse(SOURCE)
    assert decorate_in_tree(tree, "nope") == 0
    assert decorate_in_tree(tree, "Model.nope") == 0
    assert decorate_in_tree(tree, "step.<locals>.x") == 0
    with pytest.raises(OpscopeError, match="async"):
        decorate_in_tree(ast.parse("async def f():\n    pass\n"), "f")


def test_wrapper_marks_outermost_completed_calls_only() -> None:
    marks = Marks()

    def fact(n: int) -> int:
        return 1 if n <= 1 else n * wrapped(n - 1)

    wrapped = wrap_step_fn(fact, marks)
    assert wrapped(5) == 120
    assert len(marks.seen) == 1  # the recursion is one step

    def fails() -> None:
        raise RuntimeError("x")

    failing = wrap_step_fn(fails, marks)
    with pytest.raises(RuntimeError):
        failing()
    assert len(marks.seen) == 1  # a call that raised is not a completed step
    assert wrap_step_fn(wrapped, marks) is wrapped  # never wrapped twice


def test_wrap_in_module_and_post_import_patch(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "stepmod_for_test.py").write_text(
        "def work(x):\n    return x + 1\n\nclass C:\n    def m(self):\n        return 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    marks = Marks()
    target = StepFnTarget.parse("stepmod_for_test:work")
    hook = PostImportPatch(target, lambda mod: wrap_in_module(mod, "work", marks))
    hook.install()
    try:
        assert not hook.done
        import stepmod_for_test

        assert hook.done and hook.error is None
        assert stepmod_for_test.work(1) == 2
        assert len(marks.seen) == 1
        wrap_in_module(stepmod_for_test, "C.m", marks)
        assert stepmod_for_test.C().m() == 7 and len(marks.seen) == 2
        with pytest.raises(OpscopeError, match="has no"):
            wrap_in_module(stepmod_for_test, "missing", marks)
    finally:
        hook.uninstall()
        sys.modules.pop("stepmod_for_test", None)
    assert hook not in sys.meta_path


def test_post_import_patch_by_path_and_already_imported(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "pathmod_for_test.py"
    path.write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    marks = Marks()
    hook = PostImportPatch(
        StepFnTarget.parse(f"{path}:f"), lambda mod: wrap_in_module(mod, "f", marks)
    )
    hook.install()
    try:
        import pathmod_for_test

        pathmod_for_test.f()
        assert hook.done and len(marks.seen) == 1
        # a module that is already imported is patched at install
        fake = types.ModuleType("already_there_for_test")
        fake.g = lambda: 3  # type: ignore[attr-defined]
        sys.modules["already_there_for_test"] = fake
        again = PostImportPatch(
            StepFnTarget.parse("already_there_for_test:g"),
            lambda mod: wrap_in_module(mod, "g", marks),
        )
        again.install()
        assert again.done and fake.g() == 3 and len(marks.seen) == 2
    finally:
        hook.uninstall()
        sys.modules.pop("pathmod_for_test", None)
        sys.modules.pop("already_there_for_test", None)


def _inside_torch_step_wrapper() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "wrapper" and code.co_filename.endswith("optimizer.py"):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def test_optimizer_steps_marked_after_torchs_step_range() -> None:
    seen: list[tuple[object, bool]] = []

    def mark(source: str, owner: object) -> None:
        assert source == "optimizer"
        seen.append((owner, _inside_torch_step_wrapper()))

    marker = OptimizerSteps(mark)
    original = torch.optim.Optimizer.__dict__["profile_hook_step"]
    marker.install()
    try:
        # a class of our own, so that torch instruments it after install (SGD may already be)
        class MySGD(torch.optim.SGD):
            def step(self, closure: Any = None) -> Any:
                return super().step(closure)  # nested step(): still one mark

        p = torch.nn.Parameter(torch.ones(3))
        opt = MySGD([p], lr=0.1)
        for _ in range(3):
            p.grad = torch.ones(3)
            opt.step()
        assert len(seen) == 3
        assert all(owner is opt for owner, _ in seen)
        assert not any(inside for _, inside in seen)  # after torch's record_function closed
        assert not marker.marked_inside_range
    finally:
        marker.uninstall()
    assert torch.optim.Optimizer.__dict__["profile_hook_step"] is original
    p.grad = torch.ones(3)
    opt.step()
    assert len(seen) == 3  # uninstalled: no more marks


def test_opscope_step_is_a_no_op_without_a_handler_and_calls_it_with_one() -> None:
    calls: list[str] = []
    active.step()  # nothing installed: nothing happens
    previous = active.set_handler(calls.append)
    try:
        assert active.is_active()
        active.step()
        active.step()
    finally:
        active.set_handler(previous)
    assert calls == ["api", "api"]
    assert not active.is_active()


def test_opscope_step_is_exported_lazily() -> None:
    """`opscope.step` is the public name (needs "step" in opscope/__init__.py's _LAZY)."""
    import opscope

    assert opscope.step is active.step  # type: ignore[attr-defined]
