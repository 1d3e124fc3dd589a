"""Build of the optional C extensions (``opscope.trace._scan``: the event scanner;
``opscope.trace._args``: values cut out of ``args`` texts; ``opscope.analysis.critical._longest``:
longest paths for the critical path; ``opscope.analysis.critical._chains``: its host threads'
edges; ``opscope.analysis.critical._pieces``: its segments as JSON); everything else is in pyproject.toml.

The extension is optional: where no C compiler is found the install goes on without it and
ingestion uses the msgspec decoder (``opscope.trace.native.AVAILABLE`` says which).
"""

import sys

from setuptools import Extension, setup

# -ffp-contract=off: the duration arithmetic must round as NumPy's does (no fused multiply-add)
ARGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "opscope.trace._scan",
            ["src/opscope/trace/_scan.c"],
            extra_compile_args=ARGS,
            optional=True,
        ),
        Extension(
            "opscope.trace._args",
            ["src/opscope/trace/_args.c"],
            extra_compile_args=ARGS,
            optional=True,
        ),
        Extension(
            "opscope.analysis.critical._longest",
            ["src/opscope/analysis/critical/_longest.c"],
            extra_compile_args=ARGS,
            optional=True,
        ),
        Extension(
            "opscope.analysis.critical._chains",
            ["src/opscope/analysis/critical/_chains.c"],
            extra_compile_args=ARGS,
            optional=True,
        ),
        Extension(
            "opscope.analysis.critical._pieces",
            ["src/opscope/analysis/critical/_pieces.c"],
            extra_compile_args=ARGS,
            optional=True,
        ),
    ]
)
