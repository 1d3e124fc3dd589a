"""The explorer: a local web app (and the same UI as one static HTML file) over a trace.

``opscope explore PATH`` serves it (:mod:`opscope.explorer.server`); ``opscope report PATH
--format html`` writes it as one self-contained file (:mod:`opscope.explorer.static_html`).
Both fill one page (:mod:`opscope.explorer.page`) around one front-end bundle (``static/``:
plain ES module, canvas 2D, no build step), from the same data (:mod:`opscope.explorer.data`),
with the HTML renderer's sections (:mod:`opscope.render.html`); every query is answered by the
core (:mod:`opscope.trace.viewport`, :mod:`opscope.analysis.chain`, :mod:`opscope.analysis.diff`).
"""
