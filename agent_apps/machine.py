"""What this machine gives this process: the CPUs it may run on and the memory it may
still take, a container's limits included.

Defaults that scale with the machine (admission's live sandboxes, a batch's runs in
flight) read these. Each reader takes the files it reads as arguments, so a test can
hand it a container's cgroup files.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["CGROUP", "MEMINFO", "available_memory", "usable_cpus"]

#: Where a cgroup v2 container's limits are (the process's own cgroup, as mounted in it).
CGROUP = Path("/sys/fs/cgroup")
MEMINFO = Path("/proc/meminfo")


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """The CPUs this process may run on: its affinity mask (``taskset``, a container's
    ``--cpuset-cpus``), lowered to a cgroup CPU quota (``--cpus``), rounded up."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError, ZeroDivisionError):
        pass  # no cgroup v2 quota here
    return max(cpus, 1)


def available_memory(meminfo: Path = MEMINFO, cgroup: Path = CGROUP) -> int | None:
    """Bytes of memory this process could still use: the kernel's ``MemAvailable``,
    lowered to what a cgroup limit (a container) leaves; None where neither is known."""
    found: list[int] = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
                break
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        used = (cgroup / "memory.current").read_text().strip()
        if limit.isdigit() and used.isdigit():
            found.append(max(int(limit) - int(used), 0))
    except OSError:
        pass
    return min(found) if found else None
