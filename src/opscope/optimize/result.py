"""What ``opscope optimize`` found: the baseline, each candidate's outcome, the best one
(``opscope.optimize/1``, :meth:`OptimizeResult.to_dict`).

A candidate's verdict is one of four words: ``faster``, ``same``, ``slower``, ``failed``.
``unstable`` (it recompiled while measured) is ``same`` with the reason said; numerics beyond
the tolerance, an error, and a rewrite whose patch is not proven (:mod:`.verify`) are
``failed`` with the reason.  ``best`` is chosen from the intervals (:mod:`.measure`).
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
    speedup: dict[str, Any] | None = None
    verdict: str = "failed"
    reason: str | None = None
    device_ops: int | None = None
    compile_s: float | None = None
    latency_us: dict[str, Any] | None = None
    patch_verified: bool = False
    patch_check: dict[str, Any] | None = None
    needs_patch: bool = False  # its figures count only with a proven patch
    model: Any = None  # the proven patched target (timed as ``fn`` when the budget allows)
    timing: Any = None  # the rounds (bench.timing.Timing), for the choice of the best

    def fail(self, reason: str) -> None:
        self.verdict, self.reason = "failed", reason

    def absorb(self, o: Any, ref: Any, *, trimmed_rounds: int | None = None) -> None:
        """Take a :class:`~opscope.bench.compare.VariantOutcome`'s figures (``ref``: the
        original's, of the same run; ``trimmed_rounds``: the outlier rounds already dropped
        from both, see :func:`.measure.trimmed`)."""
        import math

        from opscope.optimize.measure import speed

        self.tried = True
        numerics = o.numerics_ok and (self.patch_verified or not self.needs_patch)
        self.numerics_ok = numerics
        err = None if o.numerics is None else o.numerics.get("max_abs_err")
        if self.patch_check and self.patch_check.get("max_abs_err") is not None:
            err = max(err or 0.0, self.patch_check["max_abs_err"])
        self.max_abs_err = None if err is None or not math.isfinite(err) else float(err)
        self.device_ops = o.device_ops
        self.latency_us = o.latency_us()
        self.timing = o.timing
        if o.compile_s is not None and self.compile_s is None:
            self.compile_s = o.compile_s
        if o.error:
            self.fail(o.error)
            return
        if o.timing is None or ref is None or ref.timing is None:
            self.fail("not timed")
            return
        s = speed(ref.timing.samples_s, o.timing.samples_s, trimmed_rounds=trimmed_rounds)
        self.speedup = s.to_dict()
        if not o.numerics_ok:
            n = o.numerics or {}
            self.fail(
                f"numerics: max abs error {n.get('max_abs_err'):.3g} beyond the tolerance "
                f"(rtol {n.get('rtol'):.1g}, atol {n.get('atol'):.1g})"
                + (f": {n['reason']}" if n.get("reason") else "")
            )
        elif o.recompiled:
            self.verdict = "same"
            self.reason = "recompiled while measured: no steady state to compare"
        else:
            self.verdict = s.verdict
            if s.verdict == "same":
                self.reason = "the 95% interval of the speedup includes 1 or the change is noise"
            elif s.verdict == "slower":
                self.reason = "slower than the original: not applied"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "patterns": list(self.patterns),
            "numerics_ok": self.numerics_ok,
            "max_abs_err": self.max_abs_err,
            "speedup": self.speedup,
            "verdict": self.verdict,
            "reason": self.reason,
            "device_ops_per_call": self.device_ops,
            "compile_s": self.compile_s,
            "latency_us": self.latency_us,
            "patch": self.patch,
            "patch_verified": self.patch_verified,
            "patch_check": self.patch_check,
        }


@dataclass
class NotTried:
    name: str
    kind: str
    patterns: list[str]
    reason: str
    patch: str | None = None  # a rewrite's proven patch, not timed
    patch_verified: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "patterns": list(self.patterns),
            "reason": self.reason,
        }
        if self.patch is not None:
            out["patch"] = self.patch
            out["patch_verified"] = self.patch_verified
        return out


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
    best_note: str | None = None
    tied_with: list[str] = field(default_factory=list)
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    timing: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    hunks: list[Any] = field(default_factory=list)  # the source patches (:mod:`.spell`)

    def candidate(self, name: str) -> Candidate | None:
        return next((c for c in self.candidates if c.name == name), None)

    def choose_best(self) -> str | None:
        """The fastest faster candidate with its numerics (and its patch) proven; among those
        that do not separate from it, the first tried (see :mod:`.measure`)."""
        from opscope.optimize.measure import separates

        ok = [c for c in self.candidates if c.verdict == "faster" and c.numerics_ok]
        if not ok:
            self.best = None
            return None
        fastest = max(ok, key=lambda c: (c.speedup or {}).get("point") or 0.0)
        tied = [fastest]
        for c in ok:
            if c is fastest or c.timing is None or fastest.timing is None:
                continue
            s, apart = separates(fastest.timing.samples_s, c.timing.samples_s)
            if not apart:
                tied.append(c)
        order = {c.name: i for i, c in enumerate(self.candidates)}
        tied.sort(key=lambda c: order[c.name])
        best = tied[0]
        self.best = best.name
        self.tied_with = [c.name for c in tied if c is not best]
        if self.tied_with:
            self.best_note = (
                f"{best.name} does not separate from {', '.join(self.tied_with)} (their "
                "speedups' difference is within the noise): the first tried, the simpler "
                "change, is the best"
            )
        elif len(ok) > 1:
            runner = max(
                (c for c in ok if c is not best),
                key=lambda c: (c.speedup or {}).get("point") or 0.0,
            )
            s, _ = separates(best.timing.samples_s, runner.timing.samples_s)
            self.best_note = (
                f"{best.name} is {s.point:.2f}x [{s.ci95[0]:.2f}, {s.ci95[1]:.2f}] faster than "
                f"the runner-up {runner.name}"
            )
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
            "best_note": self.best_note,
            "tied_with": list(self.tied_with),
            "near_misses": list(self.near_misses),
            "timing": dict(self.timing),
            "budget_s": self.budget_s,
            "elapsed_s": self.elapsed_s,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{c.name}={c.verdict}" for c in self.candidates)
        return f"<OptimizeResult {self.target} best={self.best} {verdicts}>"


__all__ = ["SCHEMA", "Candidate", "NotTried", "OptimizeResult"]
