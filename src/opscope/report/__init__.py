"""Renderers: a Report -> text (rich), JSON, Markdown, HTML.  No analysis happens here."""
