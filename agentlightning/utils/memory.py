"""Give the memory freed by large, short-lived tensors back to the operating system.

glibc's allocator keeps freed heap memory for reuse: after a training step (activations, gradients) and a weight
swap, hundreds of MB of free chunks stay in the process's arenas (one per thread that allocated) and count in its RSS
and PSS although nothing uses them. `malloc_trim(0)` returns the free pages of every arena. Elsewhere (another C
library, macOS, Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any, Optional

__all__ = ["release_free_memory"]


@functools.lru_cache(maxsize=1)
def _libc() -> Optional[Any]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_free_memory() -> bool:
    """Return the allocator's free pages to the OS (glibc `malloc_trim`); True when some memory was released."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.malloc_trim(0))
