"""Patches of the user's source: unified diffs (``a/`` ``b/`` headers, for ``git apply`` and
``patch -p1``) made of the edits :mod:`.spell` finds for each match.

A helper called several times is one edit (its calls need the same rewrite, else none).  Edits
of several patterns in one file are applied together from the bottom up; one that overlaps an
edit already taken is left out, with the reason.  The file itself is only changed by
:func:`write_patched`, which keeps a ``.orig`` backup.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.optimize.graph import Match
from opscope.optimize.spell import Edit, Hunk, Source, spell


@dataclass
class PatchSet:
    hunks: list[Hunk] = field(default_factory=list)
    problems: list[tuple[Match, str]] = field(default_factory=list)  # no hunk, and why
    base: Path | None = None  # the folder the diff's paths are relative to

    def chosen(self, patterns: Sequence[str] | None = None) -> list[Hunk]:
        """The hunks of ``patterns`` (all when None) that are applied: one that overlaps a
        hunk before it is left out (:func:`overlapping`)."""
        chosen = [h for h in self.hunks if patterns is None or h.pattern in patterns]
        left = overlapping(chosen)
        return [h for h in chosen if h not in left]

    def texts(self, patterns: Sequence[str] | None = None) -> dict[str, str]:
        """File -> its patched text, for the hunks of ``patterns`` (all when None)."""
        chosen = self.chosen(patterns)
        out: dict[str, str] = {}
        for file in dict.fromkeys(h.file for h in chosen):
            old = Path(file).read_text(encoding="utf-8")
            out[file] = apply_hunks(old, [h for h in chosen if h.file == file])
        return out

    def diff(self, patterns: Sequence[str] | None = None) -> str | None:
        """The unified diff of the hunks of ``patterns`` (all when None), or None."""
        out: list[str] = []
        for file, new in self.texts(patterns).items():
            old = Path(file).read_text(encoding="utf-8")
            shown = shown_path(file, self.base)
            out.append(unified(old, new, shown))
        return "".join(out) or None


def shown_path(file: str, base: Path | None = None) -> str:
    """The file relative to ``base`` (the working directory) when under it, else its name: the
    path a diff names, to apply from there (or from the file's folder)."""
    root = (base or Path.cwd()).resolve()
    try:
        return Path(file).resolve().relative_to(root).as_posix()
    except ValueError:
        return Path(file).name


def unified(old: str, new: str, path: str) -> str:
    """A unified diff ``a/path`` -> ``b/path`` that ``patch -p1`` and ``git apply`` take
    (a last line without a newline is marked so)."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    lines = list(difflib.unified_diff(a, b, fromfile=f"a/{path}", tofile=f"b/{path}", n=3))
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out += [line + "\n", "\\ No newline at end of file\n"]
    return "".join(out)


def apply_hunks(text: str, hunks: Sequence[Hunk]) -> str:
    """``text`` with the hunks' edits applied (bottom up, so line numbers hold; a hunk that
    overlaps one already taken is skipped whole)."""
    lines = text.splitlines(keepends=True)
    newline = "\n"
    taken: list[tuple[int, int]] = []
    edits: list[Edit] = []
    for h in sorted(hunks, key=lambda h: h.first):
        spans = [(e.first, e.last) for e in h.edits]
        if any(not (b < a0 or a > b0) for a, b in spans for a0, b0 in taken):
            continue
        taken += spans
        edits += h.edits
    for e in sorted(edits, key=lambda e: e.first, reverse=True):
        end = lines[e.last - 1] if e.last - 1 < len(lines) else ""
        tail = "" if end.endswith("\n") else None
        new = [line + newline for line in e.lines]
        if tail is None and new:
            new[-1] = new[-1][: -len(newline)]
        lines[e.first - 1 : e.last] = new
    return "".join(lines)


def overlapping(hunks: Sequence[Hunk]) -> list[Hunk]:
    """The hunks :func:`apply_hunks` leaves out."""
    taken: list[tuple[int, int, str]] = []
    left: list[Hunk] = []
    for h in sorted(hunks, key=lambda h: h.first):
        spans = [(e.first, e.last) for e in h.edits]
        if any(f == h.file and not (b < a0 or a > b0) for a, b in spans for a0, b0, f in taken):
            left.append(h)
            continue
        taken += [(a, b, h.file) for a, b in spans]
    return left


def write_patched(file: str | Path, hunks: Sequence[Hunk]) -> Path:
    """Apply ``hunks`` to ``file`` in place, after copying it to ``file.orig``; the backup's
    path."""
    path = Path(file)
    backup = path.with_name(path.name + ".orig")
    shutil.copy2(path, backup)
    path.write_text(apply_hunks(path.read_text(encoding="utf-8"), hunks), encoding="utf-8")
    return backup


def compile_line(build: str, is_module: bool, mode: str | None = None) -> str:
    """The one line that compiles the target: ``build`` is how it is made (``Block(dim=64)``,
    ``make_model()``) for a module, its name for a function."""
    extra = f', mode="{mode}"' if mode and mode != "default" else ""
    if mode == "neuron":
        extra = ', backend="neuron"'
    if is_module:
        return f"model = torch.compile({build}{extra})"
    return f"{build} = torch.compile({build}{extra})"


def make_patches(
    matches: Sequence[Match], all_nodes: Sequence[Any], base: Path | None = None
) -> PatchSet:
    """Hunks for ``matches`` (``all_nodes``: every node of the graphs)."""
    result = PatchSet(base=base)
    sources: dict[str, Source | None] = {}
    by_place: dict[tuple[str, int, int], Hunk] = {}
    conflicted: dict[tuple[str, int, int], str] = {}
    nodes = list(all_nodes)
    for m in matches:
        file = m.locations[-1].file if m.locations else None
        if file is None:
            result.problems.append((m, "no source location recorded"))
            continue
        if file not in sources:
            try:
                sources[file] = Source(file)
            except (OSError, SyntaxError, UnicodeDecodeError) as exc:
                sources[file] = None
                result.problems.append((m, f"cannot read {Path(file).name}: {exc}"))
                continue
        src = sources[file]
        if src is None:
            result.problems.append((m, f"cannot read {Path(file).name}"))
            continue
        hunk, why = spell(src, m, nodes)
        if hunk is None:
            result.problems.append((m, why))
            continue
        key = (hunk.file, hunk.first, hunk.last)
        same = by_place.get(key)
        if key in conflicted:
            result.problems.append((m, conflicted[key]))
        elif same is None:
            by_place[key] = hunk
            result.hunks.append(hunk)
        elif same.edits == hunk.edits:
            same.matches += 1  # a helper called again
        else:
            conflicted[key] = (
                f"the calls of {Path(file).name}:{hunk.first} need different rewrites of the "
                "same lines (a helper called with and without an argument?)"
            )
            result.problems.append((m, conflicted[key]))
            result.hunks.remove(same)
    return result


__all__ = [
    "Hunk",
    "PatchSet",
    "apply_hunks",
    "compile_line",
    "make_patches",
    "shown_path",
    "unified",
    "write_patched",
]
