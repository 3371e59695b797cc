"""`system_snapshot()`: the machine and process figures a runner reports with its worker heartbeats.

Uses psutil (imported on first call). GPU figures come from `gpustat` or NVIDIA's NVML bindings when one of them is
installed and a GPU is present; otherwise they are left out. Never raises: a figure that cannot be read is omitted.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import time
from typing import Any

__all__ = ["system_snapshot"]

logger = logging.getLogger(__name__)

_MB = 1024 * 1024


def _cpu_and_memory(psutil: Any) -> dict[str, Any]:
    memory = psutil.virtual_memory()
    stats: dict[str, Any] = {
        "cpu_count": psutil.cpu_count() or 0,
        "cpu_percent": psutil.cpu_percent(interval=None),
        "memory_total_mb": round(memory.total / _MB, 1),
        "memory_used_mb": round((memory.total - memory.available) / _MB, 1),
        "memory_percent": memory.percent,
    }
    if hasattr(os, "getloadavg"):
        stats["load_average"] = [round(value, 2) for value in os.getloadavg()]
    return stats


def _disk(psutil: Any) -> dict[str, Any]:
    usage = psutil.disk_usage(os.getcwd())
    return {"disk_total_mb": round(usage.total / _MB, 1), "disk_used_mb": round(usage.used / _MB, 1)}


def _process(psutil: Any) -> dict[str, Any]:
    process = psutil.Process()
    with process.oneshot():
        return {
            "process_rss_mb": round(process.memory_info().rss / _MB, 1),
            "process_cpu_percent": process.cpu_percent(interval=None),
            "process_threads": process.num_threads(),
        }


def _gpus() -> list[dict[str, Any]]:
    try:
        import gpustat  # type: ignore[import-not-found]

        return [
            {
                "index": gpu.index,
                "name": gpu.name,
                "utilization_percent": gpu.utilization,
                "memory_used_mb": gpu.memory_used,
                "memory_total_mb": gpu.memory_total,
                "temperature_c": gpu.temperature,
            }
            for gpu in gpustat.new_query().gpus
        ]
    except ImportError:
        pass
    import pynvml  # type: ignore[import-not-found]  # ImportError handled by the caller

    pynvml.nvmlInit()
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                {
                    "index": index,
                    "name": str(pynvml.nvmlDeviceGetName(handle)),
                    "utilization_percent": pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
                    "memory_used_mb": round(memory.used / _MB, 1),
                    "memory_total_mb": round(memory.total / _MB, 1),
                }
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def system_snapshot(include_gpu: bool = False) -> dict[str, Any]:
    """CPU, memory, disk and process figures (and GPUs with `include_gpu`) as a JSON-serialisable dict."""
    snapshot: dict[str, Any] = {
        "time": time.time(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
    }
    try:
        import psutil
    except ImportError:  # psutil is a core dependency; be tolerant of stripped environments anyway
        return snapshot
    for part in (_cpu_and_memory, _disk, _process):
        try:
            snapshot.update(part(psutil))
        except Exception as exc:  # a sandbox may hide some figures
            logger.debug("system_snapshot: %s unavailable: %r", part.__name__, exc)
    if include_gpu:
        try:
            snapshot["gpus"] = _gpus()
        except Exception as exc:
            logger.debug("system_snapshot: no GPU figures: %r", exc)
            snapshot["gpus"] = []
    return snapshot
