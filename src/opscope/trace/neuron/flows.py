"""The ``flow_id`` graph of a Neuron profile: events sharing a flow id are linked, and each
event's ``correlation`` is its connected component, as the smallest flow id of the component
(the chain framework op -> dispatch -> driver event -> ``nrta_execute_schedule`` ->
``nc_exec_running`` may use one id per hop: components cover both)."""

from __future__ import annotations

import numpy as np

from opscope.trace.rows import as_int


def flow_components(flows: list[list[str]]) -> np.ndarray:
    """Connected components of events linked by shared flow ids: for each row, the smallest
    flow id (as int64) of its component; -1 for rows without flows (or ids beyond int64)."""
    n = len(flows)
    rows: list[int] = []
    keys: list[str] = []
    for i, fl in enumerate(flows):
        for f in fl:
            rows.append(i)
            keys.append(f)
    comp = np.full(n, -1, dtype=np.int64)
    if not rows:
        return comp
    r = np.asarray(rows, dtype=np.int64)
    uniq, fidx = np.unique(np.asarray(keys, dtype=object), return_inverse=True)
    fidx = np.asarray(fidx, dtype=np.int64).reshape(-1)
    # label propagation: rows and flow ids take the smallest label they touch, until stable
    label = np.arange(n, dtype=np.int64)
    for _ in range(n + 1):
        fmin = np.full(len(uniq), n, dtype=np.int64)
        np.minimum.at(fmin, fidx, label[r])
        new = label.copy()
        np.minimum.at(new, r, fmin[fidx])
        if np.array_equal(new, label):
            break
        label = new
    values = []
    for u in uniq.tolist():
        v = as_int(u)
        values.append(v if v is not None and v >= 0 else -1)
    fval = np.asarray(values, dtype=np.int64)
    # the component's smallest flow id: min over its flow ids, via the member rows
    big = np.iinfo(np.int64).max
    fv = np.where(fval >= 0, fval, big)
    best = np.full(n, big, dtype=np.int64)
    np.minimum.at(best, label[r], fv[fidx])
    has = np.zeros(n, dtype=bool)
    has[r] = True
    out = np.where(has, best[label], -1)
    out[out == big] = -1
    return np.asarray(out, dtype=np.int64)
