"""Deprecated alias of :mod:`opscope.render.diff` (the same module)."""

import sys

from opscope.render import diff

sys.modules[__name__] = diff
