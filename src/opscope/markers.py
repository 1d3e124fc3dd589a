"""Names opscope writes into the traces it captures and recognises when it reads them back.

A leaf module (no imports): capture writes these, the analysis reads them.
"""

from __future__ import annotations

# The annotation around the device synchronisation opscope adds inside every profiled step:
# waiting, not the program's work (left out of step CPU time and of sync findings).
SYNC_ANNOTATION = "opscope::synchronize"

__all__ = ["SYNC_ANNOTATION"]
