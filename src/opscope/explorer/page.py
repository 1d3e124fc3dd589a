"""The explorer's page: its packaged assets (``static/``) and the two ways ``index.html`` is
filled in - wired to the server (:func:`server_page`), or self-contained with the app inlined
and the data embedded (:func:`static_page`).

``sections`` and ``fallback`` are trusted HTML made by the renderers
(:mod:`opscope.render.html`: every trace string in it escaped); the page places the sections at
the top of the Summary view and the fallback in a ``<noscript>``.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import Any

import orjson

from opscope.analysis.critical.path import json_default


def asset(name: str) -> str:
    """The text of a packaged asset (``static/<name>``)."""
    return (resources.files("opscope.explorer") / "static" / name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def json_script(element_id: str, data: Any) -> str:
    """An inert JSON data block; ``<`` escaped so nothing in it can end the element."""
    payload = orjson.dumps(data, default=json_default, option=orjson.OPT_SERIALIZE_NUMPY).replace(
        b"<", b"\\u003c"
    )
    return f'<script type="application/json" id="{element_id}">{payload.decode()}</script>'


def server_page(sections: str = "") -> str:
    """index.html wired to load the app from the server."""
    return (
        asset("index.html")
        .replace("<!--CSP-->", "")
        .replace("<!--HEAD-->", '<link rel="stylesheet" href="style.css">')
        .replace("<!--SCRIPTS-->", '<script type="module" src="app.js"></script>')
        .replace("<!--STUDY-->", sections)
        .replace("<!--FALLBACK-->", "")
        .replace("<!--DATA-->", "")
    )


def static_page(
    data: dict[str, Any], explorer: dict[str, Any], *, sections: str = "", fallback: str = ""
) -> str:
    """index.html with the app's script and stylesheet inlined, allowed by their SHA-256 hashes
    in the Content-Security-Policy (no ``'unsafe-inline'``), and ``data`` (the report) and
    ``explorer`` (the embedded explorer data) as inert JSON blocks."""
    script = asset("app.js")
    style = asset("style.css")
    for text in (script, style):  # inlined as is: nothing in them may end their element
        if "</script" in text.lower() or "</style" in text.lower() or "<!--" in text:
            raise ValueError("an explorer asset contains a closing tag or <!--")
    csp = (
        f"default-src 'none'; script-src {_csp_hash(script)}; style-src {_csp_hash(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        asset("index.html")
        .replace("<!--CSP-->", f'<meta http-equiv="Content-Security-Policy" content="{csp}">')
        .replace("<!--HEAD-->", f"<style>{style}</style>")
        .replace("<!--STUDY-->", sections)
        .replace("<!--FALLBACK-->", f"<noscript>{fallback}</noscript>" if fallback else "")
        .replace(
            "<!--DATA-->",
            json_script("opscope-data", data) + json_script("opscope-explorer", explorer),
        )
        .replace("<!--SCRIPTS-->", f'<script type="module">{script}</script>')
    )
