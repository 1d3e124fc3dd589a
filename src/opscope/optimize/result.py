"""What ``opscope optimize`` found: the baseline, each candidate's outcome, the best one
(``opscope.optimize/1``, :meth:`OptimizeResult.to_dict`).

A candidate's verdict is the comparison's, folded onto four words: ``faster``, ``same``,
``slower``, ``failed``.  ``unstable`` (it recompiled while measured) is ``same`` with the
reason said; ``differs`` (numerics) and ``error`` (it raised, or did not compile) are
``failed`` with the reason.  ``best`` is the faster candidate with the largest speedup whose
numerics hold, or null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA = "opscope.optimize/1"


@dataclass
class Candidate:
    name: str
    kind: str  # rewrite | compile | combined
    patterns: list[str]
    fn: Any = None
    patch: str | None = None
    compile_of: Any = None
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    tried: bool = False
    numerics_ok: bool = False
    max_abs_err: float | None = None
    speedup: float | None = None
    ci95: tuple[float, float] | None = None
    verdict: str = "failed"
    reason: str | None = None
    device_ops: int | None = None
    compile_s: float | None = None
    latency_us: dict[str, Any] | None = None

    def fail(self, reason: str) -> None:
        self.verdict, self.reason = "failed", reason

    def absorb(self, o: Any) -> None:
        """Take a :class:`~opscope.bench.compare.VariantOutcome`'s figures."""
        import math

        self.numerics_ok = o.numerics_ok
        err = None if o.numerics is None else o.numerics.get("max_abs_err")
        self.max_abs_err = None if err is None or not math.isfinite(err) else float(err)
        self.speedup = o.speedup
        self.ci95 = o.speedup_ci95
        self.device_ops = o.device_ops
        self.compile_s = o.compile_s
        self.latency_us = o.latency_us()
        v = o.verdict
        if v == "error" or o.error:
            self.fail(o.error or "error")
        elif v == "differs":
            n = o.numerics or {}
            self.fail(
                f"numerics: max abs error {n.get('max_abs_err'):.3g} beyond the tolerance "
                f"(rtol {n.get('rtol'):.1g}, atol {n.get('atol'):.1g})"
                + (f": {n['reason']}" if n.get("reason") else "")
            )
        elif v == "unstable":
            self.verdict = "same"
            self.reason = "recompiled while measured: no steady state to compare"
        elif v in ("faster", "slower", "same"):
            self.verdict = v
            if v == "same":
                self.reason = "the 95% interval of the speedup includes 1 or the change is noise"
            elif v == "slower":
                self.reason = "slower than the original: not applied"
        else:
            self.fail(f"no verdict ({v})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "patterns": list(self.patterns),
            "numerics_ok": self.numerics_ok,
            "max_abs_err": self.max_abs_err,
            "speedup": None
            if self.speedup is None
            else {"point": self.speedup, "ci95": list(self.ci95 or (self.speedup, self.speedup))},
            "verdict": self.verdict,
            "reason": self.reason,
            "device_ops_per_call": self.device_ops,
            "compile_s": self.compile_s,
            "latency_us": self.latency_us,
            "patch": self.patch,
        }


@dataclass
class NotTried:
    name: str
    kind: str
    patterns: list[str]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "patterns": list(self.patterns),
            "reason": self.reason,
        }


@dataclass
class OptimizeResult:
    """Data; ``opscope.optimize`` wraps it for printing
    (:class:`opscope.experiment.Optimization`)."""

    target: str
    device: dict[str, Any]
    budget_s: float
    baseline: dict[str, Any] = field(default_factory=dict)
    capture: dict[str, Any] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    not_tried: list[NotTried] = field(default_factory=list)
    best: str | None = None
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    hunks: list[Any] = field(default_factory=list)  # the source patches (:mod:`.patch`)

    def candidate(self, name: str) -> Candidate | None:
        return next((c for c in self.candidates if c.name == name), None)

    def choose_best(self) -> str | None:
        ok = [c for c in self.candidates if c.verdict == "faster" and c.numerics_ok]
        ok.sort(key=lambda c: c.speedup or 0.0, reverse=True)
        self.best = ok[0].name if ok else None
        return self.best

    def to_dict(self) -> dict[str, Any]:
        base = dict(self.baseline) or {"latency_us": None, "device_ops_per_call": None}
        return {
            "schema": SCHEMA,
            "target": self.target,
            "device": self.device,
            "baseline": base,
            "capture": self.capture,
            "candidates": [c.to_dict() for c in self.candidates],
            "not_tried": [n.to_dict() for n in self.not_tried],
            "best": self.best,
            "budget_s": self.budget_s,
            "elapsed_s": self.elapsed_s,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{c.name}={c.verdict}" for c in self.candidates)
        return f"<OptimizeResult {self.target} best={self.best} {verdicts}>"


__all__ = ["SCHEMA", "Candidate", "NotTried", "OptimizeResult"]
