"""glibc malloc settings for torch on a CPU: keep freed tensor memory in the process.

glibc serves a large allocation with a fresh ``mmap`` and returns it on ``free``, and trims freed
memory at the top of the heap; a forward pass allocates and frees the same tens-of-MB activations
at every call, so each call page-faults its memory in again, zeroed by the kernel (the gain:
docs/performance.md). ``tune()`` sets the ``SETTINGS`` in this process (``mallopt``; True where
glibc took them) and exports glibc's environment variables for its children (LlamaFactory, the
JVM, verl's workers); a value the user exported wins. The cost: a process keeps its peak heap
until it exits (every gentax job is one process).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: mallopt parameter -> (value, glibc's environment variable)
SETTINGS = {
    -3: (32 << 20, "MALLOC_MMAP_THRESHOLD_"),  # M_MMAP_THRESHOLD: glibc's 64-bit maximum, 32 MiB
    -1: (1 << 30, "MALLOC_TRIM_THRESHOLD_"),  # M_TRIM_THRESHOLD: trim only past 1 GiB free (an int)
    -2: (256 << 20, "MALLOC_TOP_PAD_"),  # M_TOP_PAD: grow the heap in steps of 256 MiB
}


def tune() -> bool:
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):  # no glibc (musl, macOS)
        mallopt = None
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    took = True
    for param, (value, env) in SETTINGS.items():
        value = int(os.environ.setdefault(env, str(value)))
        # int mallopt(int, int): ctypes would wrap a larger value (4 GiB -> 0: trim at every free)
        took = bool(mallopt(param, min(value, 2**31 - 1))) and took
    return took
