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
                           out in state R) and not halted, less the host's
                           interrupts on that CPU (the analysis names them
                           as offenders of their own), from the host trace
                           alone (trace-cmd report): within 2 x bound x
                           intervals (both ends of each interval) + 1 us.
  preempted_by_hog_thread  the same for the busy guest thread's slices:
                           the truth above while the guest had that thread
                           on vCPU 0 (its sched_switch on vCPU 0, at the
                           host times merge gives them; the mapping itself
                           is check_merge.py's to check): within 2 x bound
                           x (intervals + slice ends) + 1 us.
  steal_time               vCPU 0's preempted time (every offender)
                           between the busy thread's two steal readings
                           (its trace_marker lines, merge --from/--to)
                           against the guest's steal between them:
                           within 3 x 10 ms (USER_HZ 100: each reading
                           truncated to 10 ms; steal folded in at the
                           guest's ticks, 4 ms at HZ 250, at each end).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import checkrun  # noqa: E402

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


EVENT = re.compile(r"-(\d+)\s+\[(\d+)\]\s+(?:\S+\s+)?(\d+)\.(\d+):\s+(kvm_exit|kvm_entry|irq_handler_entry|"
                   r"irq_handler_exit|softirq_entry|softirq_exit):\s+(.*)")
# merge's line of a guest sched_switch on vCPU 0: its host time, next's pid
GUEST_SWITCH = re.compile(r"^g0 v0 \S+\s+.*?\s(\d+)\.(\d+): sched_switch\s+.* ==> .*:(\d+) \[-?\d+\]")
STEAL_MARK = re.compile(r"^g0 v0 \S+\s+.*?\s(\d+)\.(\d+): print:?\s.*hgclock-hog steal-(before|after) cpu0 (\d+)")


def ns_of(sec, frac):
    return int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])


def host_events(dat):
    """The host trace's sched_switch, kvm_entry/exit and interrupt events:
    [(ns, cpu, kind, a, b, c)] in time order: ("switch", prev_pid,
    prev_state, next_pid), ("kvm_exit", pid, reason), ("kvm_entry", pid),
    ("irq"/"softirq", 1 entry or 0 exit)."""
    p = checkrun.run(["trace-cmd", "report", "-t", "-i", dat], capture_output=True, text=True,
                     timeout=600)
    if p.returncode:
        raise RuntimeError("trace-cmd report %s: exit %d: %s" % (dat, p.returncode, p.stderr.strip()[-300:]))
    out = []
    for line in p.stdout.splitlines():
        m = SWITCH.search(line)
        if m:
            out.append((ns_of(m.group(3), m.group(4)), int(m.group(2)), "switch", int(m.group(6)),
                        m.group(8), int(m.group(10))))
            continue
        m = EVENT.search(line)
        if not m:
            continue
        ts, cpu, pid, name = ns_of(m.group(3), m.group(4)), int(m.group(2)), int(m.group(1)), m.group(5)
        if name == "kvm_exit":
            w = m.group(6).split()
            out.append((ts, cpu, "kvm_exit", pid, w[1] if len(w) > 1 else "", None))
        elif name == "kvm_entry":
            out.append((ts, cpu, "kvm_entry", pid, None, None))
        else:
            out.append((ts, cpu, name.split("_")[0], 1 if name.endswith("entry") else 0, None, None))
    out.sort(key=lambda e: e[0])
    return out


def guest_switches(tool, d):
    """From merge's text: vCPU 0's guest sched_switch [(host ns, "guest",
    next pid)] and the busy thread's steal markers {before|after: (host
    ns, USER_HZ)}."""
    p = checkrun.run([tool, "merge", os.path.join(d, "hog.hgc"), os.path.join(d, "hog-host.dat"),
                      os.path.join(d, "hog-host-guest.dat"), "-q", "--no-progress", "--guests", "0",
                      "--vcpus", "0", "--events", "sched:sched_switch,ftrace:print"],
                     capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise RuntimeError("hgclock merge: exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    sw, marks = [], {}
    for line in p.stdout.splitlines():
        m = GUEST_SWITCH.search(line)
        if m:
            sw.append((ns_of(m.group(1), m.group(2)), 0, "guest", int(m.group(3)), None, None))
            continue
        m = STEAL_MARK.search(line)
        if m:
            marks[m.group(3)] = (ns_of(m.group(1), m.group(2)), int(m.group(4)))
    return sw, marks


def truth(events, vtid, hog, busy):
    """From the host trace (and vCPU 0's guest switches, for the busy
    thread): the hog's on-CPU time on the CPU vCPU thread vtid left while
    that thread was runnable and not in a HLT exit, with no host interrupt
    running there; the same while the guest had @busy on vCPU 0; the
    number of such intervals; and vtid's whole runnable-but-not-running
    time (every offender)."""
    cur = {}
    irq = {}            # host CPU -> [hard irq running, softirq running]
    pre_cpu = None      # the CPU vtid left runnable, while it is out
    halted = False      # vtid's last exit was a HLT, no entry since
    guest_cur = None    # the guest's thread on vCPU 0
    hog_ns = busy_ns = all_ns = intervals = ends = 0
    last = None
    in_interval = False
    for ts, cpu, kind, a, b, c in events:
        if last is not None and pre_cpu is not None:
            all_ns += ts - last
            if cur.get(pre_cpu) == hog and not halted and not any(irq.get(pre_cpu, ())):
                hog_ns += ts - last
                if guest_cur == busy:
                    busy_ns += ts - last
        last = ts
        if kind == "switch":
            cur[cpu] = c
            if a == vtid:
                pre_cpu = cpu if b.startswith("R") else None
            if c == vtid:
                pre_cpu = None
        elif kind == "kvm_exit" and a == vtid:
            halted = "HLT" in b
        elif kind == "kvm_entry" and a == vtid:
            halted = False
        elif kind in ("irq", "softirq"):
            irq.setdefault(cpu, [0, 0])[kind == "softirq"] = a
        elif kind == "guest":
            if (guest_cur == busy) != (a == busy):
                ends += 1
            guest_cur = a
        now = pre_cpu is not None and cur.get(pre_cpu) == hog
        if now and not in_interval:
            intervals += 1
        in_interval = now
    return hog_ns, busy_ns, intervals, all_ns, ends


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
    p = checkrun.run([tool, "merge", files[0], files[1], files[2], "-q", "--no-text",
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
    events = host_events(files[1])
    gsw, marks = guest_switches(tool, d)
    events = sorted(events + gsw, key=lambda e: e[0])
    hog_ns, busy_ns, intervals, all_ns, ends = truth(events, v0, hog["pid"], busy)
    print("# host trace: %d events; the hog ran %d ns (interrupts and halts left out) in %d intervals "
          "on the CPU vCPU 0's thread left runnable, %d ns of it while the guest had thread %d on "
          "vCPU 0 (%d slice ends); that thread runnable and out %d ns in all"
          % (len(events) - len(gsw), hog_ns, intervals, busy_ns, busy, ends, all_ns))
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

    tol = 2 * bound * (max(intervals, 1) + ends) + 1000
    diff = t_ns - busy_ns
    print("# agreement (busy guest thread %d): analysis preempted by the hog %d ns, host trace %d ns "
          "while the guest ran it: differ by %+d ns, allowed %d; the hog's time in the guest's other "
          "threads' slices on vCPU 0 %d ns" % (busy, t_ns, busy_ns, diff, tol, max(v_ns - t_ns, 0)))
    tap(busy_ns > 0 and abs(diff) <= tol, "preempted_by_hog_thread",
        "analysis %d ns, host trace %d ns, allowed +-%d" % (t_ns, busy_ns, tol))

    if "before" not in marks or "after" not in marks:
        skip("steal_time", "the busy thread's steal readings are not in the guest's trace "
             "(trace_marker lines 'hgclock-hog steal-before/after')")
        return 0
    t0, t1 = marks["before"][0], marks["after"][0]
    if marks["before"][1] != steal["HOG-STEAL-BEFORE"][0] or marks["after"][1] != steal["HOG-STEAL-AFTER"][0]:
        tap(False, "steal_time", "the trace's steal readings %s are not the console's %s" % (marks, steal))
        return 1
    js = os.path.join(d, "hog-analyze-window.json")
    p = checkrun.run([tool, "merge", files[0], files[1], files[2], "-q", "--no-text", "--no-progress",
                      "--from", "%d.%09d" % divmod(t0, 10**9), "--to", "%d.%09d" % divmod(t1, 10**9),
                      "--analyze-json", js], capture_output=True, text=True)
    if p.returncode:
        tap(False, "steal_time", "hgclock merge --from/--to --analyze-json: exit %d" % p.returncode)
        return 1
    with open(js) as f:
        w = [v for v in json.load(f)["vcpus"] if v["guest"] == 0 and v["vcpu"] == 0]
    v_pre = w[0]["split"].get("preempted", 0) if w else 0
    tol = 3 * USER_HZ_NS
    diff = v_pre - steal_ns
    print("# agreement (steal): vCPU 0 preempted %d ns (every offender) in the %d ns between the busy "
          "thread's readings, guest steal on cpu0 %d ns (%d -> %d USER_HZ): differ by %+d ns, allowed %d"
          % (v_pre, t1 - t0, steal_ns, steal["HOG-STEAL-BEFORE"][0], steal["HOG-STEAL-AFTER"][0], diff, tol))
    if steal_ns == 0 and v_pre > tol:
        skip("steal_time", "the guest's steal stayed 0 (no steal-time MSR in this guest?) while the "
             "analysis saw %d ns preempted" % v_pre)
    else:
        tap(abs(diff) <= tol, "steal_time", "analysis %d ns, steal %d ns, allowed +-%d" % (v_pre, steal_ns, tol))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a checker's own failure is said, not a traceback in TAP
        print("# check_hog.py: %s: %s" % (type(e).__name__, e))
        for c in CHECKS[n:]:
            tap(False, c, "checker failed: %s" % e)
        sys.exit(2)
