"""Deprecated alias of :mod:`opscope.render.json_render` (the same module)."""

import sys

from opscope.render import json_render

sys.modules[__name__] = json_render
