"""Deprecated alias of :mod:`opscope.render.compare` (the same module)."""

import sys

from opscope.render import compare

sys.modules[__name__] = compare
