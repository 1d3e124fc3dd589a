"""Deprecated alias of :mod:`opscope.render.fmt` (the same module)."""

import sys

from opscope.render import fmt

sys.modules[__name__] = fmt
