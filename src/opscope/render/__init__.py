"""Renderers: a Report (its ``to_dict()``) -> text (rich), JSON, Markdown, HTML pieces; and the
demo's, comparison's, diff's and roofline's views.  No analysis happens here, and nothing here
imports a front-end (the HTML report is the explorer's static page, built from
:mod:`opscope.render.html`)."""
