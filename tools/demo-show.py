#!/usr/bin/env python3
"""tools/demo-show.py DIR - what make demo shows, in one screen.

DIR holds a merge scenario's recording and its merge, as
selftests/nested/check_merge.py leaves them: merged.json (hgclock
merge --json), host-guest.dat (the guest's trace as trace-cmd record -A
wrote it, with trace-cmd's own TimeShift).  Prints:

  1. the merged timeline around one vCPU's move from one host CPU to
     another: the vCPU thread's kvm_entry/kvm_exit on the host and the
     guest's events between them, each guest event with the host CPU
     that ran it, its error bound and method, and where trace-cmd's own
     placement put the same event;
  2. the error bounds of every guest event, by method;
  3. trace-cmd's placement of the same events against hgclock's.

make demo runs it after the recording; make check runs it on its merge
scenario's recording (tools/check.sh), so that the demo's own path is
tested in every CI.  Exit status 1 when a part cannot be shown (no guest
event, no move of a vCPU between host CPUs, no trace-cmd placement), 2
on bad arguments.
"""
import decimal
import json
import os
import sys

from tracecmd_shift import has_timeshift, shifted_times


def ns(us):
    """JSON microseconds (with ns decimals) -> integer ns."""
    return int((decimal.Decimal(str(us)) * 1000).to_integral_value())


def hms(t):
    return "%d.%09d" % (t // 10**9, t % 10**9)


def tracecmd_times(dat):
    """(guest CPU, raw guest ts) -> trace-cmd's host-time placement (ns),
    from two trace-cmd report runs of the guest file: raw, and shifted
    by its TimeShift option (tools/tracecmd_shift.py)."""
    return {(cpu, g): t for cpu, g, t in shifted_times(dat)}


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: demo-show.py DIR (a merge scenario's recording, merged)", file=sys.stderr)
        return 2
    d = sys.argv[1]
    try:
        with open(os.path.join(d, "merged.json")) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        print("demo-show: cannot read %s/merged.json: %s" % (d, e), file=sys.stderr)
        return 1
    host, guest = [], []
    for e in trace.get("traceEvents", []):
        # The traces' events only: an application's events and perf's
        # samples (cat "app", "perf") sit on tracks of their own, not a
        # vCPU's (their tid is not a guest CPU).
        if e.get("ph") != "i" or e.get("cat") in ("app", "perf"):
            continue
        if e.get("pid") == 1:
            host.append(e)
        elif e.get("pid") == 100 and e["args"].get("mapping", "none") != "none":
            guest.append(e)
    if not guest:
        print("demo-show: no mapped guest event in %s/merged.json" % d, file=sys.stderr)
        return 1
    guest.sort(key=lambda e: ns(e["ts"]))
    tc = tracecmd_times(os.path.join(d, "host-guest.dat"))
    shifted = has_timeshift(os.path.join(d, "host-guest.dat")) is not False

    # The first move: a vCPU's guest event on another host CPU than its
    # previous one, both with the host CPU known, inside the host's KVM
    # trace (the guest's trace may begin before it: nothing to show there).
    kvm_ts = [ns(e["ts"]) for e in host if e["name"] in ("kvm_entry", "kvm_exit")]
    host_lo, host_hi = (min(kvm_ts), max(kvm_ts)) if kvm_ts else (0, -1)
    last = {}
    move = None
    for i, e in enumerate(guest):
        v, h = e["tid"], e["args"].get("host_cpu", -1)
        if h is None or h < 0 or not host_lo <= ns(e["ts"]) <= host_hi:
            continue
        if v in last and last[v][1] != h:
            move = (last[v][0], i, v)
            break
        last[v] = (i, h)
    if move is None:
        print("demo-show: no guest event inside the host's KVM trace shows its vCPU moved "
              "between host CPUs", file=sys.stderr)
        return 1
    before, after, vcpu = move
    t0 = ns(guest[before]["ts"])
    t1 = ns(guest[after]["ts"])
    tids = {guest[before]["args"].get("host_tid"), guest[after]["args"].get("host_tid")}
    # The window: the two guest events of the move, the vCPU's other
    # guest events and its thread's KVM events between them, at most 16
    # lines (the middle elided).
    lines = []
    for e in host:
        a = e["args"]
        if a.get("pid") in tids and e["name"] in ("kvm_entry", "kvm_exit") and t0 - 50000 <= ns(e["ts"]) <= t1 + 50000:
            lines.append((ns(e["ts"]), "host", e))
    for e in guest:
        if e["tid"] == vcpu and t0 <= ns(e["ts"]) <= t1:
            lines.append((ns(e["ts"]), "guest", e))
    lines.sort(key=lambda x: x[0])
    if len(lines) > 16:
        lines = lines[:8] + [None] + lines[-7:]

    print("1. vCPU %d of the guest moves from host CPU %s to host CPU %s (the host moved its thread):"
          % (vcpu, guest[before]["args"]["host_cpu"], guest[after]["args"]["host_cpu"]))
    print("   %-19s %-8s %-24s %-13s %s" % ("host time (s)", "where", "event", "bound",
                                          "trace-cmd put it" if shifted else "trace-cmd: guest clock"))
    for x in lines:
        if x is None:
            print("   %19s" % "...")
            continue
        t, side, e = x
        a = e["args"]
        if side == "host":
            where = "host %d" % e["tid"]
            what = "%s (vCPU thread %s)" % (e["name"], a.get("pid"))
            reason = a.get("info", "").split("reason ", 1)
            if e["name"] == "kvm_exit" and len(reason) == 2:
                what = "kvm_exit %s (thread %s)" % (reason[1].split()[0], a.get("pid"))
            print("   %-19s %-8s %-38s" % (hms(t), where, what))
            continue
        where = "g v%d h%s" % (vcpu, a.get("host_cpu"))
        b = a.get("bound_ns")
        bound = "unbounded" if b is None else "+-%d ns" % b
        placed = tc.get((e["tid"], a.get("guest_ts")))
        tcs = "-" if placed is None else "%s (%+.1f us)" % (hms(placed), (placed - t) / 1000.0)
        print("   %-19s %-8s %-24s %-13s %s" % (hms(t), where, e["name"][:24], bound + " " + a.get("mapping", "")[:9], tcs))

    print()
    print("2. error bounds of all %d guest events, by method:" % len(guest))
    by = {}
    for e in guest:
        by.setdefault(e["args"].get("mapping"), []).append(e["args"].get("bound_ns"))
    for m, bs in sorted(by.items(), key=lambda x: -len(x[1])):
        known = sorted(b for b in bs if b is not None)
        unb = len(bs) - len(known)
        s = "   %-12s %6d events" % (m, len(bs))
        if known:
            s += ", bound median %d ns, max %d ns" % (known[len(known) // 2], known[-1])
        if unb:
            s += ", %d unbounded" % unb
        print(s)

    print()
    diffs = []
    for e in guest:
        placed = tc.get((e["tid"], e["args"].get("guest_ts")))
        if placed is not None:
            diffs.append(abs(placed - ns(e["ts"])))
    if not diffs:
        print("demo-show: trace-cmd report placed none of the guest events (%s/host-guest.dat)" % d,
              file=sys.stderr)
        return 1
    diffs.sort()
    if not shifted:
        # trace-cmd's sync with the guest never finished (the emulator
        # reset the guest, or its agent never sent the offsets): its report
        # shows the guest's own clock, and there is no placement to compare.
        print("3. trace-cmd wrote no TimeShift into the guest's file (its time sync with the guest did")
        print("   not finish): trace-cmd report shows these %d guest events on the guest's own clock,"
              % len(diffs))
        print("   %.1f s from hgclock's host times (median), which hgclock placed from its own records;"
              % (diffs[len(diffs) // 2] / 1e9))
        print("   they are checked against the host's own kvm_entry/kvm_exit trace (check_merge.py above).")
        return 0
    print("3. trace-cmd's own placement of the same %d guest events (its TimeShift) differs from"
          % len(diffs))
    print("   hgclock's by median %.1f us, max %.1f us; hgclock's is checked against the host's own"
          % (diffs[len(diffs) // 2] / 1000.0, diffs[-1] / 1000.0))
    print("   kvm_entry/kvm_exit trace (check_merge.py above: every event inside guest mode, on its host CPU).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
