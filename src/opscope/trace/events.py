"""Converted columns and their links -> the event table (:data:`~.schema.EVENT_SCHEMA`).

Every reader ends here: the Kineto files (:mod:`opscope.trace.parts`) and the Neuron profiles
(:mod:`opscope.trace.neuron.link`) hand over their raw columns (``cat``, ``name``, ``pid``,
``tid``, ``source``, ``kind``, ``lane``, ``start_ns``, ``dur_ns``, ``correlation``,
``external_id``, ``args``) and the :class:`~opscope.trace.link.Links` computed over them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from opscope.trace.link import Links, null_if_negative
from opscope.trace.schema import EVENT_SCHEMA


def event_table(raw: pa.Table, links: Links) -> pa.Table:
    """The event table of one file or profile: ids from 0, rank 0 (stacking sets both)."""
    n = raw.num_rows

    def one(arr: pa.Array) -> pa.ChunkedArray:
        return pa.chunked_array([arr])

    def enc(name: str) -> pa.ChunkedArray:
        col = raw.column(name)
        if pa.types.is_dictionary(col.type):  # encoded by kineto.classify.classify_table
            return col
        return one(col.combine_chunks().dictionary_encode())

    arrays = [
        one(pa.array(np.arange(n, dtype=np.int64))),
        one(pa.array(np.zeros(n, dtype=np.int32))),
        raw.column("source"),
        raw.column("kind"),
        enc("cat"),
        enc("name"),
        enc("pid"),
        enc("tid"),
        raw.column("lane"),
        raw.column("start_ns"),
        raw.column("dur_ns"),
        raw.column("correlation"),
        raw.column("external_id"),
        one(null_if_negative(links.parent)),
        one(null_if_negative(links.op)),
        one(pa.array(links.step.astype(np.int32, copy=False), pa.int32(), mask=links.step < 0)),
        raw.column("args"),  # the largest column stays in its runs: no second copy
        one(null_if_negative(links.launch)),
    ]
    return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)
