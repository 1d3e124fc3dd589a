"""Renders what ``opscope optimize`` found (``opscope.optimize/1``): plain text for the
terminal and Markdown, both strings from the document."""

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


def _ops(c: dict[str, Any]) -> str:
    n = c.get("device_ops_per_call")
    return "-" if n is None else str(n)


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for c in doc["candidates"]:
        rows.append(
            [
                c["name"],
                c["kind"],
                _numerics(c),
                f"{c['compile_s']:.1f} s" if c.get("compile_s") is not None else "-",
                _speedup(c),
                c["verdict"],
                _ops(c),
            ]
        )
    return rows


HEADERS = ["candidate", "kind", "numerics", "compile", "speedup [95% CI]", "verdict", "ops/call"]


def _head(doc: dict[str, Any]) -> list[str]:
    dev = doc.get("device") or {}
    base = doc.get("baseline") or {}
    lat = base.get("latency_us") or {}
    lines = [f"opscope optimize: {doc['target']} on {dev.get('name', dev.get('kind', '?'))}"]
    ops = base.get("device_ops_per_call")
    lines.append(
        f"original: {us(lat.get('median')) if lat else '-'} per call"
        + (f", {ops} device ops per call" if ops is not None else "")
    )
    cap = doc.get("capture") or {}
    if cap.get("error"):
        lines.append(f"graph: {cap['error']}")
    else:
        found = [m["pattern"] for m in cap.get("matches") or []]
        lines.append(
            "patterns found: "
            + (", ".join(dict.fromkeys(found)) if found else "none")
            + (f" ({len(found)} matches)" if found else "")
        )
    return lines


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
    for note in doc.get("notes") or []:
        lines.append(f"note: {note}")
    patches = []
    for c in doc["candidates"]:
        if c["name"] == best and c.get("patch"):
            patches.append((f"patch for {c['name']}", c["patch"]))
    return lines, patches


def render_text(doc: dict[str, Any]) -> str:
    """A plain-text table of the candidates, then the reasons, the best and its patch."""
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
        out += ["", f"{title}:", patch.rstrip("\n")]
    return "\n".join(out) + "\n"


def render_markdown(doc: dict[str, Any]) -> str:
    """The same as Markdown: a table, the reasons, the best candidate's patch in a diff block."""
    head = _head(doc)
    out = [f"## {head[0]}", "", *[f"- {h}" for h in head[1:]], ""]
    out.append("| " + " | ".join(HEADERS) + " |")
    out.append("|" + "|".join("---" for _ in HEADERS) + "|")
    for r in _rows(doc):
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |")
    lines, patches = _tail(doc)
    out += ["", *[f"- {line}" for line in lines]]
    for title, patch in patches:
        out += ["", f"### {title}", "", "```diff", patch.rstrip("\n"), "```"]
    return "\n".join(out) + "\n"


__all__ = ["render_markdown", "render_text"]
