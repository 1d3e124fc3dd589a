"""Deprecated alias of :mod:`opscope.render.roofline` (the same module)."""

import sys

from opscope.render import roofline

sys.modules[__name__] = roofline
