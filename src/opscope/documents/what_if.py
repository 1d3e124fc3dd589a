"""A what-if's answer: the critical path recomputed with some work made faster (the report's
``what_if``, with ``opscope report --what-if SPEC``, on a cluster too; the explorer's and
MCP's what-if; see docs/critical-path.md)."""

from typing import Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.critical_path import BoundBy


class WhatIfChange(TypedDict):
    """One change of the spec."""

    name: str
    """A path label (``launch_overhead``) or an event name (``aten::mul``)."""
    factor: float
    """What its time is multiplied by (0: gone, 0.5: twice as fast)."""


class WhatIfStep(TypedDict):
    """One profiler step's path, before and with the changes."""

    step: int
    length_us: float
    projected_us: float
    saved_us: float


class RankWhatIf(TypedDict):
    """The what-if on one rank's own path (a job's ranks: each projected alone)."""

    rank: int | None
    spec: str
    changes: list[WhatIfChange]
    length_us: float
    """The path now, µs."""
    projected_us: float
    """The path with the changes made, µs (never longer than now where every factor is at
    most 1)."""
    saved_us: float
    bound_by_us: BoundBy
    """The projected path's time per label."""
    steps: list[WhatIfStep]


class WhatIf(TypedDict):
    """The window's path recomputed with the spec's changes: a rank's path, or a job's path
    (its ranks joined at their collectives) with each rank's own in ``ranks``."""

    scope: Literal["rank", "job"]
    rank: NotRequired[int | None]
    """(scope rank) The rank."""
    spec: str
    changes: list[WhatIfChange]
    length_us: float
    projected_us: float
    saved_us: float
    bound_by_us: BoundBy
    steps: list[WhatIfStep]
    by_rank_us: NotRequired[dict[str, float]]
    """(scope job) The projected job path's time on each rank, µs, by rank."""
    ranks: NotRequired[list[RankWhatIf]]
    """(scope job) Each rank's own path, projected alone."""


__all__ = ["RankWhatIf", "WhatIf", "WhatIfChange", "WhatIfStep"]
