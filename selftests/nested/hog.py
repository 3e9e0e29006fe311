#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A host task with a known duty cycle, for the analysis's ground truth
(merge-host.sh's hog phase, check_hog.py).

Usage: hog.py CPU SECONDS [BUSY_MS SLEEP_MS]

Pinned to host CPU, named "hog" (its comm in the host's sched_switch),
at the priority it was started with (the vCPU threads' SCHED_OTHER,
nice 0: merge-host.sh says both), it spins BUSY_MS of wall time
(default 20) and sleeps SLEEP_MS (default 30), for SECONDS.  Prints one
JSON line: its pid, CPU, nice, cycles and wall time.
"""
import json
import os
import sys
import time


def main():
    cpu, secs = int(sys.argv[1]), float(sys.argv[2])
    busy = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.020
    nap = float(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0.030
    with open("/proc/self/comm", "w") as f:
        f.write("hog")
    os.sched_setaffinity(0, {cpu})
    t0 = time.monotonic()
    cycles = 0
    while time.monotonic() - t0 < secs:
        t = time.monotonic()
        while time.monotonic() - t < busy:
            pass
        cycles += 1
        time.sleep(nap)
    print(json.dumps({"pid": os.getpid(), "cpu": cpu, "nice": os.nice(0), "cycles": cycles,
                      "busy_ms": busy * 1000, "sleep_ms": nap * 1000,
                      "wall_s": round(time.monotonic() - t0, 3),
                      "cpu_s": round(time.process_time(), 3)}))


if __name__ == "__main__":
    main()
