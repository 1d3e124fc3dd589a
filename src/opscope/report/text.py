"""Deprecated alias of :mod:`opscope.render.text` (the same module)."""

import sys

from opscope.render import text

sys.modules[__name__] = text
