"""Vendor-neutral keys for device-runtime API names, so that CUDA and HIP traces line up.

The same program records ``cudaDeviceSynchronize`` on an NVIDIA GPU and
``hipDeviceSynchronize`` on an AMD one; a comparison of the two must see one call, not a
resolved one and a new one.  :func:`canonical` maps a recorded runtime or driver API name to a
key that is the same across vendors:

* the vendor prefix goes: ``cuda`` (runtime API), ``hip``, ``cu`` (driver API), when an upper-case
  letter follows (``cudaMemcpyAsync``, ``hipMemcpyAsync``, ``cuMemcpyAsync`` -> ``MemcpyAsync``;
  library calls such as ``cublasSgemm`` or ``cudnnConvolutionForward`` keep their name);
* version and ABI suffixes go: ``_v2``, ``_v11060``, ``_ptsz``/``_ptds`` (per-thread default
  stream), HIP's ``R0600`` (``hipGetDevicePropertiesR0600``);
* calls that do the same thing under different names share one key (:data:`ALIASES`): every
  plain kernel launch (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cuLaunchKernel``,
  ``hipLaunchKernel``, ``hipExtLaunchKernel``, ``hipModuleLaunchKernel``,
  ``hipExtModuleLaunchKernel``) is ``LaunchKernel``; ``cuCtxSynchronize`` is
  ``DeviceSynchronize``; ``cuMemAlloc`` is ``Malloc``; HIP's blocking ``hipMemcpyWithStream`` is
  ``Memcpy`` like ``cudaMemcpy``.

Any other name (framework ops, kernels, other runtimes' calls such as MTIA ``synchronize``) is
its own key.  Keys are for matching only; what a report or a diff shows stays as recorded
(:func:`display` joins two spellings: ``cudaDeviceSynchronize / hipDeviceSynchronize``).
"""

from __future__ import annotations

import re
from functools import lru_cache

# a vendor-prefixed API name: cuda*/hip*/cu* followed by an upper-case letter, optional suffix
_API = re.compile(r"^(?:cuda|hip|cu)([A-Z][A-Za-z0-9]*?)(?:R\d{4})?(?:_v\d+|_ptsz|_ptds)*$")
# the same, found inside free text (a finding's title)
_API_IN_TEXT = re.compile(r"\b(?:cuda|hip|cu)[A-Z][A-Za-z0-9]*(?:_v\d+|_ptsz|_ptds)*\b")

# keys (prefix and suffix already gone) that name the same operation
ALIASES: dict[str, str] = {
    # kernel launches
    "LaunchKernelExC": "LaunchKernel",
    "LaunchKernelEx": "LaunchKernel",
    "ExtLaunchKernel": "LaunchKernel",
    "ModuleLaunchKernel": "LaunchKernel",
    "ExtModuleLaunchKernel": "LaunchKernel",
    "ModuleLaunchCooperativeKernel": "LaunchCooperativeKernel",
    # whole-device syncs
    "CtxSynchronize": "DeviceSynchronize",
    "ThreadSynchronize": "DeviceSynchronize",
    # blocking copies
    "MemcpyWithStream": "Memcpy",
    # memory
    "MemAlloc": "Malloc",
    "MemFree": "Free",
    "MemAllocAsync": "MallocAsync",
    "MemFreeAsync": "FreeAsync",
    "MallocHost": "HostAlloc",
    "HostMalloc": "HostAlloc",
    "MemAllocHost": "HostAlloc",
    "MemHostAlloc": "HostAlloc",
    "FreeHost": "HostFree",
    "MemFreeHost": "HostFree",
}


@lru_cache(maxsize=4096)
def canonical(name: str) -> str:
    """The vendor-neutral key of a runtime/driver API name; any other name unchanged."""
    m = _API.match(name)
    if m is None:
        return name
    key = m.group(1)
    return ALIASES.get(key, key)


def is_runtime_api(name: str) -> bool:
    """Whether :func:`canonical` treats ``name`` as a vendor-prefixed API name."""
    return _API.match(name) is not None


def same_call(a: str, b: str) -> bool:
    """Whether two recorded names are the same runtime call (``cudaStreamSynchronize`` and
    ``hipStreamSynchronize``)."""
    return a == b or canonical(a) == canonical(b)


def neutral_text(text: str) -> str:
    """``text`` with every runtime API name in it replaced by its key (for matching titles)."""
    return _API_IN_TEXT.sub(lambda m: canonical(m.group(0)), text)


def display(a: str | None, b: str | None) -> str:
    """Two recorded spellings of one thing: the name once when they agree, else ``a / b``."""
    if a is None:
        return b or ""
    return a if b is None or a == b else f"{a} / {b}"


def both_spellings(text_b: str, text_a: str) -> str:
    """``text_b`` with each runtime name that ``text_a`` spells differently shown both ways:
    ``2 × hipDeviceSynchronize`` against ``2 × cudaDeviceSynchronize`` gives
    ``2 × cudaDeviceSynchronize / hipDeviceSynchronize``."""
    in_a: dict[str, str] = {}
    for m in _API_IN_TEXT.finditer(text_a):
        in_a.setdefault(canonical(m.group(0)), m.group(0))

    def swap(m: re.Match[str]) -> str:
        name = m.group(0)
        other = in_a.get(canonical(name))
        return name if other is None or other == name else display(other, name)

    return _API_IN_TEXT.sub(swap, text_b)
