"""Deprecated alias of :mod:`opscope.render.html`, and of the HTML report that used to live
here, now :func:`opscope.explorer.static_html.render`."""

from __future__ import annotations

from typing import Any

from opscope.render.html import (
    EXTENSION,
    plain_tables,
    roofline_section,
    sections,
    study_section,
)

__all__ = ["EXTENSION", "plain_tables", "render", "roofline_section", "sections", "study_section"]


def render(data: dict[str, Any], top: int = 50, *, trace: Any = None) -> str:
    """Deprecated: :func:`opscope.explorer.static_html.render`."""
    from opscope.explorer.static_html import render as html_report

    return html_report(data, top, trace=trace)
