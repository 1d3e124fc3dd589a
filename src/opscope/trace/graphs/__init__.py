"""CUDA/HIP graphs: replays found in a trace, captures found in a trace, and the merge that
attributes every replayed kernel to the op that launched it while the graph was captured.

* :mod:`.replays` - the graph launches of a trace and the device work each one ran, in the
  graph's node order (``graph node id`` where the trace records it, else start time);
* :mod:`.captures` - the capture windows of a trace (``StreamBeginCapture`` to
  ``StreamEndCapture``): the node-creating calls in them, the kernel each names, the ops
  around them (with their module and call stack);
* :mod:`.align` - one replay's kernels paired with one capture's launches;
* :mod:`.sources` - which capture traces to read (a file, a folder of them, the
  ``capture_traces/`` folder beside an execution trace, ``execution_details.json``);
* :mod:`.merge` - the merged event table: the captured ops copied into every replay they
  ran in, each replayed kernel's ``op_id`` pointing at its copy;
* :mod:`.records` - the merge's records (captured ops, captures, :class:`GraphAttribution`,
  kept on the merged trace as ``Trace.graph_capture``).

See docs/cuda-graphs.md.
"""

from __future__ import annotations

from opscope.trace.graphs.merge import attribute, with_captures
from opscope.trace.graphs.records import GraphAttribution
from opscope.trace.graphs.replays import Replay, find_replays
from opscope.trace.graphs.sources import capture_paths, default_capture_folder

__all__ = [
    "GraphAttribution",
    "Replay",
    "attribute",
    "capture_paths",
    "default_capture_folder",
    "find_replays",
    "with_captures",
]
