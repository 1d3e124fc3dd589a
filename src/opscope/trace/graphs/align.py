"""One replay's device work paired with one capture's node calls.

A replay runs the nodes its capture made, so its work and the capture's node calls are one
sequence seen twice: in node order on both sides when the replay records node ids, in start
order on one stream otherwise.  The pairing tries, in turn (TraceLens's merge tries the same
first three, ``trace_capture_merge_experimental.verify_subtree_events``):

1. **positional** - as many nodes as calls and every pair compatible (same kind; the same
   kernel name where the capture names its kernels);
2. **per stream** (a replay on several streams, names known) - each stream's work in order,
   each call given to the stream whose next kernel it names (TraceLens's ``align_streams``);
3. **by name** - as many of each kernel name on both sides: the i-th ``k`` of the replay is
   the i-th ``k`` of the capture (the graph's scheduler ran independent nodes in another
   order);
4. **forward scan** - each replay node takes the next compatible call; a call no node takes
   is skipped (the profiler lost a node's record), a node no call fits stays unmatched.

The first that pairs every node wins; otherwise the one pairing most.  A pairing is a list:
for each replay node, the index of its capture call, or -1.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence

Node = tuple[str, str | None]
"""A node as the sides see it: its kind (``kernel``, ``memcpy``, ``memset``) and its kernel's
name (None where the side does not know it)."""

POSITIONAL = "positional"
STREAMS = "streams"
BY_NAME = "by_name"
SCAN = "forward_scan"


def compatible(replay: Node, call: Node) -> bool:
    """A replay node and a capture call can be the same node."""
    if replay[0] != call[0]:
        return False
    if replay[0] != "kernel" or call[1] is None or replay[1] is None:
        return True
    return replay[1] == call[1]


def _key(node: Node) -> tuple[str, str | None]:
    return (node[0], node[1] if node[0] == "kernel" else None)


def positional(replay: Sequence[Node], calls: Sequence[Node]) -> list[int] | None:
    if len(replay) != len(calls):
        return None
    if all(compatible(a, b) for a, b in zip(replay, calls, strict=True)):
        return list(range(len(replay)))
    return None


def by_name(replay: Sequence[Node], calls: Sequence[Node]) -> list[int] | None:
    """The i-th node of each (kind, name) paired with the i-th call of it; None unless both
    sides hold the same count of each."""
    if len(replay) != len(calls) or any(c[0] == "kernel" and c[1] is None for c in calls):
        return None
    queues: dict[tuple[str, str | None], deque[int]] = defaultdict(deque)
    for i, c in enumerate(calls):
        queues[_key(c)].append(i)
    out: list[int] = []
    for node in replay:
        q = queues.get(_key(node))
        if not q:
            return None
        out.append(q.popleft())
    return out


def per_stream(replay: Sequence[Node], streams: Sequence[int], calls: Sequence[Node]) -> list[int]:
    """Each call, in order, to the stream whose next unmatched node it fits (the longest run
    of fits ahead breaks a tie between streams)."""
    queues: dict[int, deque[int]] = {}
    for i, s in enumerate(streams):
        queues.setdefault(int(s), deque()).append(i)
    out = [-1] * len(replay)
    for ci, call in enumerate(calls):
        fits = [s for s, q in queues.items() if q and compatible(replay[q[0]], call)]
        if not fits:
            continue
        chosen = fits[0]
        if len(fits) > 1:
            best = -1
            for s in fits:
                q = queues[s]
                run = 0
                while (
                    run < len(q)
                    and ci + run < len(calls)
                    and compatible(replay[q[run]], calls[ci + run])
                ):
                    run += 1
                if run > best:
                    best, chosen = run, s
        out[queues[chosen].popleft()] = ci
    return out


def forward_scan(replay: Sequence[Node], calls: Sequence[Node]) -> list[int]:
    out: list[int] = []
    ci = 0
    for node in replay:
        j = ci
        while j < len(calls) and not compatible(node, calls[j]):
            j += 1
        if j < len(calls):
            out.append(j)
            ci = j + 1
        else:
            out.append(-1)
    return out


def pair(
    replay: Sequence[Node], calls: Sequence[Node], streams: Sequence[int] | None = None
) -> tuple[list[int], str]:
    """The pairing of a replay's nodes with a capture's calls and how it was found
    (:data:`POSITIONAL`, :data:`STREAMS`, :data:`BY_NAME` or :data:`SCAN`)."""
    got = positional(replay, calls)
    if got is not None:
        return got, POSITIONAL
    candidates: list[tuple[list[int], str]] = []
    named = any(c[0] == "kernel" and c[1] is not None for c in calls)
    if streams is not None and named and len(set(int(s) for s in streams)) > 1:
        got = per_stream(replay, streams, calls)
        if all(i >= 0 for i in got):
            return got, STREAMS
        candidates.append((got, STREAMS))
    got = by_name(replay, calls)
    if got is not None:
        return got, BY_NAME
    candidates.append((forward_scan(replay, calls), SCAN))
    return max(candidates, key=lambda c: sum(i >= 0 for i in c[0]))


def matched(pairing: Sequence[int]) -> int:
    """How many nodes a pairing pairs."""
    return sum(i >= 0 for i in pairing)


__all__ = ["BY_NAME", "POSITIONAL", "SCAN", "STREAMS", "Node", "compatible", "matched", "pair"]
