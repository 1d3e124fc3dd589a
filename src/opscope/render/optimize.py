"""Renders what ``opscope optimize`` found (``opscope.optimize/1``): plain text for the
terminal and Markdown, both strings from the document.  Every candidate's patch is printed
(a compile line, a diff, or both), each with whether it was proven."""

from __future__ import annotations

from typing import Any

from opscope.render.fmt import us


def _speedup(c: dict[str, Any]) -> str:
    sp = c.get("speedup")
    if not sp:
        return "-"
    lo, hi = sp["ci95"]
    return f"{sp['point']:.2f}x [{lo:.2f}, {hi:.2f}]"


def _numerics(c: dict[str, Any]) -> str:
    err = c.get("max_abs_err")
    if c.get("numerics_ok"):
        return f"ok ({err:.1g})" if err is not None else "ok"
    return "DIFFERS" if err is not None else "-"


def _patch_cell(c: dict[str, Any]) -> str:
    if c["kind"] == "compile":
        return "line"
    if c.get("patch_verified"):
        return "proven"
    return "NOT PROVEN" if c.get("patch") else "none"


def _ops(c: dict[str, Any]) -> str:
    n = c.get("device_ops_per_call")
    return "-" if n is None else str(n)


def _latency(c: dict[str, Any]) -> str:
    lat = c.get("latency_us") or {}
    return us(lat.get("median")) if lat.get("median") is not None else "-"


HEADERS = [
    "candidate",
    "kind",
    "patch",
    "numerics",
    "compile",
    "latency",
    "speedup [95% CI]",
    "verdict",
    "ops/call",
]


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    return [
        [
            c["name"],
            c["kind"],
            _patch_cell(c),
            _numerics(c),
            f"{c['compile_s']:.1f} s" if c.get("compile_s") is not None else "-",
            _latency(c),
            _speedup(c),
            c["verdict"],
            _ops(c),
        ]
        for c in doc["candidates"]
    ]


def _head(doc: dict[str, Any]) -> list[str]:
    dev = doc.get("device") or {}
    base = doc.get("baseline") or {}
    lat = base.get("latency_us") or {}
    lines = [f"opscope optimize: {doc['target']} on {dev.get('name', dev.get('kind', '?'))}"]
    ops = base.get("device_ops_per_call")
    if lat.get("median") is not None:
        lines.append(
            f"original: {us(lat['median'])} per call"
            + (f", {ops} device ops per call" if ops is not None else "")
        )
    else:
        lines.append(f"original: not timed (budget {doc.get('budget_s', 0):.0f} s)")
    t = doc.get("timing") or {}
    if t.get("threads") is not None:
        rounds = f"{t['rounds']} interleaved rounds, " if t.get("rounds") else ""
        lines.append(
            f"timing: {rounds}torch.set_num_threads({t['threads']})"
            + (f" (was {t['threads_before']})" if t.get("threads_before") != t["threads"] else "")
            + (", timed in process CPU time" if t.get("clock") == "process_cpu" else "")
            + (f", {t['outlier_rounds']} outlier rounds dropped" if t.get("outlier_rounds") else "")
        )
    cap = doc.get("capture") or {}
    if cap.get("error"):
        lines.append(f"graph: {cap['error']}")
    else:
        found = [m["pattern"] for m in cap.get("matches") or []]
        via = " (from the torch.compile graph)" if cap.get("fx_error") else ""
        lines.append(
            "patterns found: "
            + (", ".join(dict.fromkeys(found)) if found else "none")
            + (f" ({len(found)} matches)" if found else "")
            + via
        )
    return lines


def _check(c: dict[str, Any]) -> str | None:
    pc = c.get("patch_check")
    if not pc or c["kind"] == "compile":
        return None
    if c.get("patch_verified"):
        what = "parameters randomised" if pc.get("params_randomised") else "fresh inputs"
        err = pc.get("max_abs_err")
        mode = ", in eval mode" if pc.get("eval_mode") else ""
        return (
            f"proven: the patched source gives the original's outputs on {pc.get('inputs')} "
            f"input sets ({what}{mode}; max abs error {err:.1g})"
        )
    return None


def _tail(doc: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
    """(lines, [(title, patch)])"""
    lines: list[str] = []
    for c in doc["candidates"]:
        if c.get("reason") and c["verdict"] != "faster":
            lines.append(f"{c['name']}: {c['verdict']}: {c['reason']}")
    for n in doc.get("not_tried") or []:
        lines.append(f"{n['name']}: not tried: {n['reason']}")
    best = doc.get("best")
    lines.append(f"best: {best}" if best else "best: none (no candidate was faster and correct)")
    if doc.get("best_note"):
        lines.append(f"  {doc['best_note']}")
    for m in doc.get("near_misses") or []:
        lines.append(f"near-miss: {m['pattern']} at {m['where']}: {m['reason']}")
    for note in doc.get("notes") or []:
        lines.append(f"note: {note}")
    patches: list[tuple[str, str]] = []
    shown: dict[str, str] = {}
    for c in doc["candidates"]:
        patch = c.get("patch")
        if not patch:
            continue
        check = _check(c)
        title = f"patch for {c['name']}"
        if c["kind"] != "compile" and not c.get("patch_verified"):
            title += " (NOT PROVEN: do not apply)"
        if patch in shown:
            patches.append((f"{title}: the same as {shown[patch]}'s", ""))
            continue
        shown[patch] = c["name"]
        patches.append((title + (f"\n{check}" if check else ""), patch))
    for n in doc.get("not_tried") or []:
        if n.get("patch"):
            how = "not tried" if n["kind"] == "compile" else "proven, not timed"
            if n["kind"] != "compile" and not n.get("patch_verified"):
                how = "NOT PROVEN, not timed"
            patches.append((f"patch for {n['name']} ({how})", n["patch"]))
    return lines, patches


def render_text(doc: dict[str, Any]) -> str:
    """A plain-text table of the candidates, then the reasons, the best and every patch."""
    rows = [HEADERS, *_rows(doc)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    out = [*_head(doc), ""]
    for i, r in enumerate(rows):
        out.append("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(r)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    lines, patches = _tail(doc)
    out += ["", *lines]
    for title, patch in patches:
        out += ["", f"{title}:" if patch else title]
        if patch:
            out.append(patch.rstrip("\n"))
    return "\n".join(out) + "\n"


def render_markdown(doc: dict[str, Any]) -> str:
    """The same as Markdown: a table, the reasons, every patch in a diff block."""
    head = _head(doc)
    out = [f"## {head[0]}", "", *[f"- {h}" for h in head[1:]], ""]
    out.append("| " + " | ".join(HEADERS) + " |")
    out.append("|" + "|".join("---" for _ in HEADERS) + "|")
    for r in _rows(doc):
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |")
    lines, patches = _tail(doc)
    out += ["", *[f"- {line}" for line in lines]]
    for title, patch in patches:
        first, _, rest = title.partition("\n")
        out += ["", f"### {first}", ""]
        if rest:
            out += [rest, ""]
        if not patch:
            continue
        fence = "diff" if patch.startswith("---") else "python"
        out += [f"```{fence}", patch.rstrip("\n"), "```"]
    return "\n".join(out) + "\n"


__all__ = ["render_markdown", "render_text"]
