"""Deprecated alias of :mod:`opscope.render.markdown` (the same module)."""

import sys

from opscope.render import markdown

sys.modules[__name__] = markdown
