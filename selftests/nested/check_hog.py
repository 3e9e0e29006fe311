#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The analysis (merge --analyze-json) against ground truth: the merge
scenario's hog phase (merge-host.sh, HGCLOCK_MERGE_HOG=1).

Usage: check_hog.py HGCLOCK DIR

DIR holds hog.hgc, hog-host.dat, hog-host-guest.dat (hgclock record and
trace-cmd record -A of the phase), hog.json (hog.py's pid and host CPU),
hog-vcpus (vCPU 0's and 1's host threads) and hog-guest.txt (the busy
guest thread's pid and its CPU's /proc/stat steal, in USER_HZ, as it
started and as it stopped).  Else, hog.why says why the phase did not
run, and every check is a skip that says so.

Checks (TAP, hog.*; '#' lines give the numbers):
  preempted_by_hog_vcpu    the analysis's time for vCPU 0 preempted by
                           the hog, against the hog's on-CPU time on that
                           CPU while vCPU 0's thread was runnable (switched
                           out in state R), from the host trace alone:
                           within 2 x bound x intervals (both ends of
                           each interval) + 1 us.
  preempted_by_hog_thread  the same for the busy guest thread's slices:
                           within 2 x bound x intervals, plus the hog
                           time that fell in slices of the guest's other
                           threads on vCPU 0 (its sleeper and agents),
                           at most 10% of the truth.
  steal_time               the busy thread's preempted time (every
                           offender) against the guest's steal over the
                           same thread's life: within 3 x 10 ms (USER_HZ
                           100: each reading truncated to 10 ms; steal
                           folded in at the guest's ticks, 4 ms at HZ 250,
                           at each end; the thread's start and exit
                           outside the two readings).
"""
import json
import os
import re
import subprocess
import sys

n = 0


def tap(ok, name, why=""):
    global n
    n += 1
    print(("ok" if ok else "not ok") + " %d hog.%s%s" % (n, name, (" # " + why) if why and not ok else ""))


def skip(name, why):
    global n
    n += 1
    print("ok %d hog.%s # SKIP %s" % (n, name, why))


CHECKS = ("preempted_by_hog_vcpu", "preempted_by_hog_thread", "steal_time")
USER_HZ_NS = 10 * 1000 * 1000


def skip_all(why):
    for c in CHECKS:
        skip(c, why)
    return 0


SWITCH = re.compile(r"-(\d+)\s+\[(\d+)\]\s+(?:\S+\s+)?(\d+)\.(\d+):\s+sched_switch:\s+"
                    r"(.*):(\d+) \[(-?\d+)\] (\S+) ==> (.*):(\d+) \[(-?\d+)\]")


def host_switches(dat):
    """[(ns, cpu, prev_pid, prev_state, next_pid)] of the host trace."""
    p = subprocess.run(["trace-cmd", "report", "-t", "-i", dat], capture_output=True, text=True,
                       timeout=600)
    if p.returncode:
        raise RuntimeError("trace-cmd report %s: exit %d: %s" % (dat, p.returncode, p.stderr.strip()[-300:]))
    out = []
    for line in p.stdout.splitlines():
        m = SWITCH.search(line)
        if not m:
            continue
        ts = int(m.group(3)) * 10**9 + int(m.group(4).ljust(9, "0")[:9])
        out.append((ts, int(m.group(2)), int(m.group(6)), m.group(8), int(m.group(10))))
    out.sort(key=lambda e: e[0])
    return out


def truth(switches, vtid, hog):
    """The hog's on-CPU time on the CPU vCPU thread vtid left while that
    thread was runnable, the number of such intervals, and vtid's whole
    runnable-but-not-running time (every offender), from sched_switch
    alone."""
    cur = {}
    pre_cpu = None      # the CPU vtid left runnable, while it is out
    hog_ns = all_ns = intervals = 0
    last = None
    in_interval = False
    for ts, cpu, prev, state, nxt in switches:
        if last is not None and pre_cpu is not None:
            all_ns += ts - last
            if cur.get(pre_cpu) == hog:
                hog_ns += ts - last
        last = ts
        cur[cpu] = nxt
        if prev == vtid:
            pre_cpu = cpu if state.startswith("R") else None
        if nxt == vtid:
            pre_cpu = None
        now = pre_cpu is not None and cur.get(pre_cpu) == hog
        if now and not in_interval:
            intervals += 1
        in_interval = now
    return hog_ns, intervals, all_ns


def offender(split, pid):
    for o in split.get("preempted_by", []):
        if o.get("tid") == pid:
            return o["ns"], o.get("count", 0)
    return 0, 0


def main():
    tool, d = sys.argv[1], sys.argv[2]
    why = os.path.join(d, "hog.why")
    if os.path.exists(why) and os.path.getsize(why):
        return skip_all("the hog phase did not run whole: " + open(why).read().strip().replace("\n", "; "))
    files = [os.path.join(d, f) for f in ("hog.hgc", "hog-host.dat", "hog-host-guest.dat", "hog.json",
                                          "hog-vcpus", "hog-guest.txt")]
    missing = [os.path.basename(f) for f in files if not os.path.exists(f)]
    if missing:
        return skip_all("no " + ", ".join(missing) + " (HGCLOCK_MERGE_HOG=0, or the phase did not run)")
    with open(files[3]) as f:
        hog = json.load(f)
    with open(files[4]) as f:
        v0, v1 = (int(x) for x in f.read().split())
    steal = {}
    with open(files[5]) as f:
        for line in f:
            w = line.split()
            if len(w) >= 4 and w[0] in ("HOG-STEAL-BEFORE", "HOG-STEAL-AFTER") and w[1] == "cpu0":
                steal[w[0]] = (int(w[2]), int(w[3]))
    if len(steal) != 2 or steal["HOG-STEAL-BEFORE"][1] != steal["HOG-STEAL-AFTER"][1]:
        return skip_all("the guest's busy thread did not report both steal readings (hog-guest.txt)")
    busy = steal["HOG-STEAL-BEFORE"][1]
    steal_ns = (steal["HOG-STEAL-AFTER"][0] - steal["HOG-STEAL-BEFORE"][0]) * USER_HZ_NS
    print("# hog: pid %d on host CPU %d, nice %d, %d cycles of %g ms busy / %g ms asleep, %.3f s CPU in %.3f s"
          % (hog["pid"], hog["cpu"], hog["nice"], hog["cycles"], hog["busy_ms"], hog["sleep_ms"],
             hog["cpu_s"], hog["wall_s"]))
    print("# vCPU 0 thread %d, vCPU 1 thread %d; guest busy thread %d on vCPU 0" % (v0, v1, busy))

    js = os.path.join(d, "hog-analyze.json")
    p = subprocess.run([tool, "merge", files[0], files[1], files[2], "-q", "--no-text",
                        "--no-progress", "--analyze-json", js], capture_output=True, text=True)
    if p.stderr.strip():
        print("# " + p.stderr.strip().replace("\n", "\n# "))
    if p.returncode:
        for c in CHECKS:
            tap(False, c, "hgclock merge --analyze-json: exit %d" % p.returncode)
        return 1
    with open(js) as f:
        a = json.load(f)
    for c in a.get("cannot_split", []):
        print("# analysis cannot split: %s" % c)
    vc = [v for v in a["vcpus"] if v["guest"] == 0 and v["vcpu"] == 0]
    th = [t for t in a["threads"] if t["guest"] == 0 and t["tid"] == busy]
    switches = host_switches(files[1])
    hog_ns, intervals, all_ns = truth(switches, v0, hog["pid"])
    print("# host trace: %d sched_switch; the hog ran %d ns in %d intervals on the CPU vCPU 0's thread "
          "left runnable; that thread runnable and out %d ns in all" % (len(switches), hog_ns, intervals, all_ns))
    if not vc or not th:
        why = "no vCPU 0 in the analysis" if not vc else "no busy thread %d in the analysis" % busy
        for c in CHECKS:
            tap(False, c, why)
        return 1
    vc, th = vc[0], th[0]
    bound = max(vc.get("max_bound_ns", 0), 1)
    v_ns, v_cnt = offender(vc["split"], hog["pid"])
    t_ns, t_cnt = offender(th["split"], hog["pid"])
    slack = 2 * bound * max(intervals, 1)

    tol = slack + 1000
    diff = v_ns - hog_ns
    print("# agreement (vCPU 0): analysis preempted by the hog %d ns (%d preemptions), host trace %d ns "
          "(%d intervals): differ by %+d ns, allowed %d (bound %d ns)" % (v_ns, v_cnt, hog_ns, intervals,
                                                                         diff, tol, bound))
    tap(hog_ns > 0 and abs(diff) <= tol, "preempted_by_hog_vcpu",
        "analysis %d ns, host trace %d ns (%d intervals), allowed +-%d" % (v_ns, hog_ns, intervals, tol))

    other = max(v_ns - t_ns, 0)
    tol = slack + hog_ns // 10
    diff = t_ns - hog_ns
    print("# agreement (busy guest thread %d): analysis preempted by the hog %d ns, host trace %d ns: differ "
          "by %+d ns (%.2f%%), allowed %d; the hog's time in the guest's other threads' slices %d ns"
          % (busy, t_ns, hog_ns, diff, 100.0 * diff / hog_ns if hog_ns else 0, tol, other))
    tap(hog_ns > 0 and abs(diff) <= tol, "preempted_by_hog_thread",
        "analysis %d ns, host trace %d ns, allowed +-%d" % (t_ns, hog_ns, tol))

    t_pre = th["split"].get("preempted", 0)
    tol = 3 * USER_HZ_NS
    diff = t_pre - steal_ns
    print("# agreement (steal): busy thread preempted %d ns (every offender; wall %d ns in %d slices), "
          "guest steal on cpu0 %d ns (%d -> %d USER_HZ): differ by %+d ns, allowed %d"
          % (t_pre, th["wall_ns"], th["slices"], steal_ns, steal["HOG-STEAL-BEFORE"][0],
             steal["HOG-STEAL-AFTER"][0], diff, tol))
    if steal_ns == 0 and t_pre > tol:
        skip("steal_time", "the guest's steal stayed 0 (no steal-time MSR in this guest?) while the "
             "analysis saw %d ns preempted" % t_pre)
    else:
        tap(abs(diff) <= tol, "steal_time", "analysis %d ns, steal %d ns, allowed +-%d" % (t_pre, steal_ns, tol))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a checker's own failure is said, not a traceback in TAP
        print("# check_hog.py: %s: %s" % (type(e).__name__, e))
        for c in CHECKS[n:]:
            tap(False, c, "checker failed: %s" % e)
        sys.exit(2)
