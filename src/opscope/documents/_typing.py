"""``TypedDict`` and ``NotRequired`` that understand each other on every supported Python.

Python 3.10's ``typing.TypedDict`` does not know ``NotRequired`` (3.11 does): there the ones of
``typing_extensions`` are used.  The types are evaluated at run time (no postponed
annotations): msgspec reads them to write the JSON Schemas.
"""

import sys

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # pragma: no cover - Python 3.10
    from typing_extensions import NotRequired, TypedDict

__all__ = ["NotRequired", "TypedDict"]
