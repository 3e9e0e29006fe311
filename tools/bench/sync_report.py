#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""tools/bench/sync.sh's analysis: every guest event trace-cmd recorded,
converted to host time by trace-cmd (its TimeShift) and by hgclock (the
correlation file recorded in the same run), against ground truth: the
guest's raw timestamp minus the TSC offset KVM had written for that vCPU
(KVM's kvm_write_tsc_offset trace on the host's TSC, from the offsets
debugfs showed at the start), through the guest's exact kvm-clock
conversion and the host's cyc2ns for the local clock.

usage: sync_report.py DIR HGCLOCK SCENARIO   (prints BENCH lines)"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kvmtruth import M64, conv_invert, host_ns_fn, host_tsc_before_exit, \
    load_debugfs_offsets, parse_kvm_trace  # noqa: E402

EXACT = 0x2


def run(*args, inp=None):
    r = subprocess.run(args, input=inp, capture_output=True, text=True)
    if r.returncode:
        sys.exit("sync_report: %s: %s" % (" ".join(args[:3]), r.stderr.strip()[:500]))
    return r.stdout


TS = re.compile(r"\[(\d+)\]\s*(?:\S+\s+)?(\d+)(?:\.(\d+))?:\s")


def events(dat, raw):
    """(cpu, timestamp) of every event of a trace-cmd file, in file order
    per CPU; ns clocks printed sec.nsec (-t), counters as integers."""
    out = run("trace-cmd", "report", "-t", *(["--raw-ts"] if raw else []), "-i", dat)
    ev = {}
    for line in out.splitlines():
        m = TS.search(line)
        if not m:
            continue
        cpu = int(m.group(1))
        ts = int(m.group(2)) * 10**9 + int(m.group(3).ljust(9, "0")[:9]) if m.group(3) else int(m.group(2))
        ev.setdefault(cpu, []).append(ts)
    return ev


def main(d, tool, scenario):
    recs = [json.loads(l) for l in run(tool, "dump", "--json", d + "/bench.hgc").splitlines()]
    khz = next(r["tsc_khz"] for r in recs if r.get("section") == "host_info")
    host_ns = host_ns_fn(recs)
    gconv = {}
    for r in recs:
        if r.get("from") == "guest" and r.get("type") == "cyc2ns":
            gconv.setdefault(r["cpu"], []).append(r)
    # The offsets debugfs showed at the start, then every one KVM wrote.
    exits, writes, prevs = parse_kvm_trace(d + "/truth.txt")
    offs = {v: [(0, o)] for v, o in load_debugfs_offsets(d + "/offsets-start").items()}
    for v, w in writes.items():
        offs.setdefault(v, [(0, prevs[v])]).extend(w)
    for v in offs:
        offs[v].sort()

    def truth_tsc(vcpu, gtsc):
        """Host TSC of a guest TSC reading: the offset whose span holds it."""
        best = None
        for t, o in offs.get(vcpu, []):
            h = (gtsc - o) & M64
            if h >= t:
                best = h
        return best

    def truth_local(vcpu, gns):
        snaps = [r for r in gconv.get(vcpu, []) if r["sched_clock_ns"] <= gns] or gconv.get(vcpu, [])[:1]
        if not snaps or not snaps[-1]["conv_flags"] & EXACT:
            return None
        h = truth_tsc(vcpu, conv_invert(snaps[-1], gns))
        return None if h is None else host_ns(h)

    # hgclock mark's markers: each reading is followed by a CPUID exit on
    # the host's TSC, which anchors the offset in force.
    marks = []
    if os.path.exists(d + "/marks.jsonl"):
        marks = [json.loads(l) for l in open(d + "/marks.jsonl") if l.strip()]

    # Only markers inside the recording: after its last host record the
    # file knows no offsets (the guest keeps marking until told to stop).
    rec_end = max((r["tsc"] for r in recs if r.get("from") == "host" and "tsc" in r), default=0)
    mk = [(m, host_tsc_before_exit(offs.get(m["cpu"], []), m["tsc"], exits[m["seq"]]))
          for m in marks if m["seq"] in exits and exits[m["seq"]] <= rec_end]
    mk = [(m, t) for m, t in mk if t is not None]
    if mk:
        inp = "".join("%d %d\n" % (m["cpu"], m["tsc"]) for m, _ in mk)
        for method in ("auto", "exit", "probe"):
            res = [json.loads(l) for l in run(tool, "convert", "--json", "--clock", "x86-tsc", "--method",
                                              method, d + "/bench.hgc", inp=inp).splitlines()]
            e = sorted(abs(x["host_value"] - t) * 1e6 / khz for x, (_, t) in zip(res, mk) if "host_value" in x)
            if e:
                tag = "sync.%s.x86-tsc.markers.hgclock-%s" % (scenario, method)
                print("BENCH %s.median_error %.0f ns" % (tag, e[len(e) // 2]))
                print("BENCH %s.max_error %.0f ns" % (tag, e[-1]))
                print("BENCH %s.events %d count" % (tag, len(e)))
        lat = sorted((exits[m["seq"]] - t) * 1e6 / khz for m, t in mk)
        print("BENCH sync.%s.marker_exit_latency.median %.0f ns" % (scenario, lat[len(lat) // 2]))

        # ftrace's local clock at the markers.  Without an exact guest
        # conversion (moving offsets) the marker read it by ioctl, between
        # two TSC reads, right after a snapshot of its CPU's kvm-clock
        # parameters: the TSC where those give the reading, if it lies
        # between the two reads, is the reading's, and KVM's trace puts
        # it on the host's TSC.  (Not through hgclock's own PVCLOCK
        # records: the guest's snapshot is its side's view of them.)
        def marker_local_truth(m, t_exit):
            if m.get("exact"):
                return host_ns(t_exit)
            snaps = [r for r in gconv.get(m["cpu"], []) if r["tsc"] <= m["tsc"]]
            if not snaps or "tsc_after" not in m:
                return None
            t = conv_invert(snaps[-1], m["sched_clock_ns"])
            if not m["tsc"] <= t <= m["tsc_after"]:
                return None
            h = truth_tsc(m["cpu"], t)
            return None if h is None else host_ns(h)

        ml = [(m, marker_local_truth(m, t)) for m, t in mk]
        ml = [(m, t) for m, t in ml if t is not None]
        print("# %d of %d markers with a local-clock truth" % (len(ml), len(mk)))
        if ml:
            inp = "".join("%d %d\n" % (m["cpu"], m["sched_clock_ns"]) for m, _ in ml)
            for method in ("auto", "exit", "probe"):
                res = [json.loads(l) for l in run(tool, "convert", "--json", "--clock", "local",
                                                  "--method", method, d + "/bench.hgc",
                                                  inp=inp).splitlines()]
                e = sorted(abs(x["host_value"] - t) for x, (_, t) in zip(res, ml) if "host_value" in x)
                if e:
                    tag = "sync.%s.local.markers.hgclock-%s" % (scenario, method)
                    print("BENCH %s.median_error %.0f ns" % (tag, e[len(e) // 2]))
                    print("BENCH %s.max_error %.0f ns" % (tag, e[-1]))
                    print("BENCH %s.events %d count" % (tag, len(e)))
                    b = sorted(x["bound_ns"] for x in res if x.get("bound_ns") is not None)
                    if b:
                        print("BENCH %s.median_bound %.0f ns" % (tag, b[len(b) // 2]))
                    # Does the stated bound hold?  A value hgclock could
                    # not bound (bound_ns null: before a vCPU's first
                    # sample or after its last) is counted apart: it
                    # claims nothing, and is not counted as held.
                    held = sum(1 for x, (_, t) in zip(res, ml)
                               if "host_value" in x and x.get("bound_ns") is not None
                               and abs(x["host_value"] - t) <= x["bound_ns"])
                    unb = sum(1 for x in res if "host_value" in x and x.get("bound_ns") is None)
                    print("BENCH %s.within_bound %d count" % (tag, held))
                    print("BENCH %s.unbounded %d count" % (tag, unb))

    # The probes' two legs against the truth: where in its round trip the
    # guest really read its TSC.  A round trip cannot tell its legs apart,
    # so a probe fit is off by half the difference between the fastest
    # request and the fastest reply (Documentation/sync.rst): that floor,
    # whatever the fit does, is printed next to the fit's own error.
    legs = []
    for p in (r for r in recs if r.get("section") == "probe"):
        t = truth_tsc(p["guest_cpu"], p["guest_tsc"])
        if t is not None and p["host_tsc_send"] <= t <= p["host_tsc_recv"]:
            legs.append(((t - p["host_tsc_send"]) * 1e6 / khz, (p["host_tsc_recv"] - t) * 1e6 / khz))
    if legs:
        req, rep = min(l[0] for l in legs), min(l[1] for l in legs)
        rtt = sorted(a + b for a, b in legs)
        tag = "sync.%s.probe" % scenario
        print("BENCH %s.fastest_request %.0f ns" % (tag, req))
        print("BENCH %s.fastest_reply %.0f ns" % (tag, rep))
        print("BENCH %s.asymmetry_floor %.0f ns" % (tag, abs(req - rep) / 2))
        print("BENCH %s.median_round_trip %.0f ns" % (tag, rtt[len(rtt) // 2]))
        print("BENCH %s.probes %d count" % (tag, len(legs)))

    print("# sync scenario %s: %d offset changes seen by KVM's trace" %
          (scenario, sum(len(v) - 1 for v in offs.values())))
    results = {}
    for clock, tc_method in (("local", "ptp"), ("x86-tsc", "kvm")):
        gfile = d + "/tc-%s-guest.dat" % clock
        if not os.path.exists(gfile) or not os.path.getsize(gfile):
            print("# %s: trace-cmd recorded no guest data (its run failed)" % clock)
            continue
        try:
            raw, conv = events(gfile, True), events(gfile, False)
        except SystemExit as e:
            print("# %s" % e)
            continue
        pairs = [(c, r, v) for c in raw for r, v in zip(raw[c], conv.get(c, []))]
        truth = [(truth_tsc(c, r) if clock == "x86-tsc" else truth_local(c, r)) for c, r, _ in pairs]
        unit = 1e6 / khz if clock == "x86-tsc" else 1.0
        errs = {}
        errs["trace-cmd-" + tc_method] = [abs(v - t) * unit for (c, r, v), t in zip(pairs, truth) if t is not None]
        for method in ("auto", "exit", "probe"):
            inp = "".join("%d %d\n" % (c, r) for c, r, _ in pairs)
            res = [json.loads(l) for l in run(tool, "convert", "--json", "--clock", clock, "--method",
                                              method, d + "/bench.hgc", inp=inp).splitlines()]
            errs["hgclock-" + method] = [abs(x["host_value"] - t) * unit for x, t in zip(res, truth)
                                         if t is not None and "host_value" in x]
        for name, e in errs.items():
            e.sort()
            if not e:
                print("# %s %s: no events with ground truth" % (clock, name))
                continue
            med, mx = e[len(e) // 2], e[-1]
            results[(clock, name)] = med
            tag = "sync.%s.%s.%s" % (scenario, clock, name)
            print("BENCH %s.median_error %.0f ns" % (tag, med))
            print("BENCH %s.max_error %.0f ns" % (tag, mx))
            print("BENCH %s.events %d count" % (tag, len(e)))
        tc = results.get((clock, "trace-cmd-" + tc_method))
        for m in ("auto", "exit", "probe"):
            h = results.get((clock, "hgclock-" + m))
            if tc is not None and h is not None:
                print("BENCH sync.%s.%s.trace_cmd_over_hgclock_%s %.1f ratio" %
                      (scenario, clock, m, tc / max(h, 1.0)))
    record_usage(d, scenario)


def record_usage(d, scenario):
    """The recorder's cost (sync-host.sh's record-usage.txt): correlation
    file bytes per vCPU-hour and CPU time per wall second, one guest, over
    an idle window and over the trace-cmd runs."""
    try:
        lines = [l.split() for l in open(d + "/record-usage.txt")]
    except OSError:
        print("# no record-usage.txt: no record cost figures")
        return
    kv = {l[0]: l[1:] for l in lines if l}
    try:
        ticks = int(kv["ticks_per_s"][0])
        vcpus = int(kv["guest_vcpus"][0])
    except (KeyError, IndexError, ValueError):
        print("# record-usage.txt is incomplete")
        return
    for window in ("idle", "busy"):
        try:
            w0, c0, b0 = (int(x) for x in kv[window + "_start"][:3])
            w1, c1, b1 = (int(x) for x in kv[window + "_end"][:3])
        except (KeyError, ValueError):
            print("# record-usage.txt: no %s window" % window)
            continue
        # The guest's QEMU at the window's end (a fourth field since
        # 2026-12-07): a guest the emulator killed inside the window
        # made its figures too low.
        alive = kv[window + "_end"][3:4]
        if alive and alive[0] != "1":
            print("# record-usage.txt: the guest died inside the %s window: no %s figures" % (window, window))
            continue
        secs = (w1 - w0) / 1e9
        if secs <= 0 or vcpus <= 0 or b1 < b0 or c1 < c0 or ticks <= 0:
            print("# record-usage.txt: %s window inconsistent" % window)
            continue
        tag = "record.%s.%s" % (scenario, window)
        print("BENCH %s.file_bytes_per_vcpu_hour %.0f bytes" % (tag, (b1 - b0) / secs * 3600 / vcpus))
        print("BENCH %s.file_bytes_per_s %.0f bytes" % (tag, (b1 - b0) / secs))
        print("BENCH %s.cpu_percent_per_guest %.2f percent" % (tag, 100.0 * (c1 - c0) / ticks / secs))


if __name__ == "__main__":
    main(*sys.argv[1:4])
