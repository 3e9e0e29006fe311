#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""After a suspend/resume cycle: every online CPU has a "resume" CYC2NS
snapshot, and each CPU's conversion published at resume, applied to a
READ_CLOCK taken afterwards (`hgclock now --all-cpus --json`), puts the
TSC bracket around the sched_clock reading (exact conversions only:
derived ones within their bound).

usage: check_resume.py SNAPSHOTS.jsonl NOW.json NR_CPUS
Prints one line; exits 0 when it holds, 1 when not, 4 when there is
nothing exact to check (a skip).
"""
import json
import sys


def apply(conv, tsc):
    delta = (tsc - conv["tsc_base"]) & (2**64 - 1)
    pre = conv["pre_shift"]
    delta = delta << pre if pre >= 0 else delta >> -pre
    return (conv["offset_ns"] + ((delta * conv["mult"]) >> conv["shift"])) & (2**64 - 1)


def main():
    snaps = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
    now = json.load(open(sys.argv[2]))
    nr_cpus = int(sys.argv[3])
    resumed = {}
    for s in snaps:
        if s.get("type") == "cyc2ns" and s.get("reason") == "resume":
            resumed[s["cpu"]] = s
    if len(resumed) != nr_cpus:
        print(f"resume snapshots on CPUs {sorted(resumed)}, want {nr_cpus} CPUs")
        return 1
    checked = 0
    for sample in now["samples"]:
        snap = resumed.get(sample["cpu"])
        conv = snap["conv"]
        flags = conv["flags"].split(",")
        if "exact" in flags:
            slack = 0
        elif "derived" in flags:
            slack = conv["bound_ns"]
        else:
            continue
        lo = apply(conv, sample["tsc_before"]) - slack
        hi = apply(conv, sample["tsc_after"]) + slack
        if not lo <= sample["sched_clock_ns"] <= hi:
            print(f"cpu {sample['cpu']}: sched_clock {sample['sched_clock_ns']} outside "
                  f"[{lo}, {hi}] with the conversion published at resume")
            return 1
        checked += 1
    if not checked:
        print("no valid conversion to check")
        return 4
    print(f"{len(resumed)} resume snapshots; {checked} CPUs' conversions agree with READ_CLOCK")
    return 0


sys.exit(main())
