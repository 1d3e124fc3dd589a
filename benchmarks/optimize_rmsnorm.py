"""``opscope optimize`` on the reference study's naive RMSNorm: the speedups it finds.

Runs :func:`opscope.optimize` on ``opscope.study.rmsnorm.naive_rmsnorm`` at 4096x4096 fp32
(``--shape`` to change it) and prints each candidate: numerics, compile time, the speedup over
the original measured in the same interleaved run (with its 95 % interval), the verdict and
device ops per call.  Times are this machine's; nothing is asserted.

    python benchmarks/optimize_rmsnorm.py [--shape 4096x4096:fp32] [--budget 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    import torch

    import opscope
    from opscope.study.rmsnorm import naive_rmsnorm, parse_shape

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="4096x4096:fp32")
    p.add_argument("--budget", type=float, default=300.0)
    p.add_argument("--device", default=None)
    p.add_argument("--min-time", type=float, default=0.3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    dims, dtype = parse_shape(args.shape)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(dims, generator=gen).to(getattr(torch, dtype))
    w = (1 + 0.1 * torch.randn(dims[-1], generator=gen)).to(getattr(torch, dtype))
    t0 = time.perf_counter()
    result = opscope.optimize(
        naive_rmsnorm,
        (x, w),
        args.device,
        budget_s=args.budget,
        min_run_s=args.min_time,
        progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True),
    )
    doc = result.to_dict()
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return 0
    print(
        f"naive RMSNorm {args.shape} on {doc['device']['name']}, {time.perf_counter() - t0:.0f} s"
    )
    print(f"original: {doc['baseline']['latency_us']['median']:.0f} us per call")
    for c in doc["candidates"]:
        sp = c["speedup"]
        speed = f"{sp['point']:.2f}x [{sp['ci95'][0]:.2f}, {sp['ci95'][1]:.2f}]" if sp else "-"
        comp = f"{c['compile_s']:.1f} s" if c["compile_s"] is not None else "-"
        print(
            f"  {c['name']:<36} numerics {'ok' if c['numerics_ok'] else 'DIFFERS':<7} "
            f"compile {comp:>7}  speedup {speed:<22} {c['verdict']:<7} "
            f"ops/call {c['device_ops_per_call']}"
        )
    for n in doc["not_tried"]:
        print(f"  {n['name']:<36} not tried: {n['reason']}")
    print(f"best: {doc['best']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
