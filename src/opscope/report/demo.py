"""Deprecated alias of :mod:`opscope.render.demo` (the same module)."""

import sys

from opscope.render import demo

sys.modules[__name__] = demo
