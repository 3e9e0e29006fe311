#!/usr/bin/env python3
"""Checks hgclock merge on a real host/guest recording (merge-host.sh).

Usage: check_merge.py HGCLOCK DIR

DIR holds merge.hgc (hgclock record), host.dat and host-guest.dat
(trace-cmd record -A), vcpu-tids ("n tid" from qemu's "CPU n/KVM" thread
names) and guest-apic ("cpu apicid" per guest CPU, from the guest's
/proc/cpuinfo).  Runs hgclock merge, then checks every converted guest
event against the host's own trace, which hgclock did not write: a guest
event can only happen while its vCPU is in guest mode, i.e. between a
kvm_entry and the next kvm_exit of its vCPU thread on the host, and on
the host CPU of that kvm_entry.  Guest CPU c is KVM's vCPU whose
vcpu_id (kvm_entry's "vcpu N") is c's APIC ID: with a gapped topology
neither c nor qemu's thread number n is that id.  With
HGCLOCK_EXPECT_APIC_GAP=1 the guest's APIC IDs must have a gap (else the
topology did not take and the check proves nothing).  Prints TAP lines
(merge.*).
"""
import bisect
import re
import decimal
import gc
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import checkrun  # noqa: E402
from tracecmd_shift import has_timeshift, shifted_times  # noqa: E402

n = 0
failed = 0


TEXT_TIME = re.compile(r"\s(\d+)\.(\d{9}):\s")


def tap(ok, name, why=""):
    global n, failed
    n += 1
    if not ok:
        failed += 1
    print(("ok" if ok else "not ok") + " %d merge.%s%s" % (n, name, (" # " + why) if why and not ok else ""))
    if why and ok:
        print("# %s: %s" % (name, why))


def skip(name, why):
    global n
    n += 1
    print("ok %d merge.%s # SKIP %s" % (n, name, why))


def ns(v):
    return int(decimal.Decimal(v) * 1000)


def main():
    tool, d = sys.argv[1], sys.argv[2]
    corr, host, guest = (os.path.join(d, f) for f in ("merge.hgc", "host.dat", "host-guest.dat"))
    txt, js = os.path.join(d, "merged.txt"), os.path.join(d, "merged.json")
    pf = os.path.join(d, "merged.pftrace")
    # The applications' own events (merge-host.sh, merge-guest.sh), when they came.
    happ, gapp = os.path.join(d, "host-app.hgev"), os.path.join(d, "guest-app.hgev")
    apps = []
    if os.path.exists(happ):
        apps += ["--app", happ]
    if os.path.exists(gapp):
        apps += ["--guest-app", "0=" + gapp]
    hperf, gperf = os.path.join(d, "host-perf.data"), os.path.join(d, "guest-perf.txt")
    if os.path.exists(hperf):
        apps += ["--perf", hperf]
    if os.path.exists(gperf):
        apps += ["--guest-perf", "0=" + gperf]
    report = os.path.join(d, "report.txt")
    if "--perf" in apps or "--guest-perf" in apps:
        apps += ["--report", report, "--sort", "guest,pcpu,vcpu,comm,sym"]
    # --analyze-json: the Perfetto trace carries each guest thread's
    # time on the host too, checked against this report below.
    ajs = os.path.join(d, "analyze.json")
    p = checkrun.run([tool, "merge", corr, host, guest, "-o", txt, "--json", js, "--perfetto", pf,
                      "--analyze-json", ajs, "--no-progress"] + apps, capture_output=True, text=True)
    print("# " + p.stderr.strip().replace("\n", "\n# "))
    tap(p.returncode == 0, "runs", "exit %d" % p.returncode)
    if p.returncode:
        return
    with open(js) as f:
        # Hundreds of thousands of dicts that live to the end: out of
        # the cyclic collector's way (it scanned them again and again).
        gc.disable()
        trace = json.load(f, parse_float=decimal.Decimal)
        gc.freeze()
        gc.enable()
    tap(True, "json_loads", "%d trace events" % len(trace["traceEvents"]))
    # The Perfetto trace of the same merge: decoded by protoc, its
    # invariants, the same trace events at the same ns as the text.
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if shutil.which("protoc"):
        r = checkrun.run([sys.executable, os.path.join(top, "tools", "pftrace_check.py"),
                          os.path.join(top, "user", "merge", "perfetto_trace.proto"), pf, txt],
                         capture_output=True, text=True)
        out = (r.stdout + r.stderr).strip().split("\n")
        tap(r.returncode == 0, "perfetto_invariants", " | ".join(out[:6]))
        # Each guest thread's track: its slices and pieces are the
        # report's split to the ns, each preemption a flow to the host
        # task that ran instead (this recording has the host's
        # sched_switch, the unit tests' has not).
        r = checkrun.run([sys.executable, os.path.join(top, "tools", "pftrace_analyze_check.py"),
                          os.path.join(top, "user", "merge", "perfetto_trace.proto"), pf, ajs],
                         capture_output=True, text=True)
        out = (r.stdout + r.stderr).strip().split("\n")
        tap(r.returncode == 0, "perfetto_analysis", " | ".join(out[:6]))
    else:
        skip("perfetto_invariants", "no protoc (tools/deps.sh installs protobuf-compiler)")
        skip("perfetto_analysis", "no protoc (tools/deps.sh installs protobuf-compiler)")

    tids = set()
    with open(os.path.join(d, "vcpu-tids")) as f:
        for line in f:
            tids.add(int(line.split()[1]))
    # Guest CPU -> APIC ID, as the guest's kernel saw it.
    apic = {}
    try:
        with open(os.path.join(d, "guest-apic")) as f:
            for line in f:
                c, a = line.split()
                apic[int(c)] = int(a)
    except OSError:
        pass
    gap = any(c != a for c, a in apic.items())
    want_gap = os.environ.get("HGCLOCK_EXPECT_APIC_GAP") == "1"
    tap(bool(apic) and (gap or not want_gap), "guest_apic_ids",
        "guest CPU:APIC ID " + (" ".join("%d:%d" % x for x in sorted(apic.items())) or "none") +
        (" (a gap, as the topology asks)" if gap else " (no gap)"))

    # The host's KVM entries and exits per vCPU (kvm_entry's vcpu_id;
    # kvm_exit has no vcpu field: its thread's last kvm_entry's), in host
    # time, for the guest's vCPU threads only.
    tid_vcpu = {}
    events = []
    guest = []
    happ_ev, gapp_ev, hperf_ev, gperf_ev = [], [], [], []
    nhost = 0
    for e in trace["traceEvents"]:
        if e.get("cat") == "app":
            (happ_ev if e["pid"] == 1 else gapp_ev).append(e)
            continue
        if e.get("cat") == "perf":
            (hperf_ev if e["pid"] == 1 else gperf_ev).append(e)
            continue
        # Disruption marks (category "hgclock": a guest the emulator
        # killed while the recording ran) are merge's, not trace events.
        if e.get("ph") != "i" or e.get("cat") == "hgclock":
            continue
        if e["pid"] == 1:
            nhost += 1
            a = e["args"]
            if e["name"] in ("kvm_entry", "kvm_exit") and a["pid"] in tids:
                if e["name"] == "kvm_entry":
                    m = re.search(r"\bvcpu (\d+)", a.get("info", ""))
                    if m:
                        tid_vcpu[a["pid"]] = int(m.group(1))
                events.append((ns(e["ts"]), e["name"] == "kvm_entry", e["tid"], a["pid"]))
        elif e["pid"] == 100:
            guest.append(e)
    events.sort(key=lambda x: x[0])
    kvm = {}
    host_cpus = {}
    for t, entry, cpu, pid in events:
        if pid not in tid_vcpu:
            continue
        v = tid_vcpu[pid]
        kvm.setdefault(v, []).append((t, entry, cpu))
        host_cpus.setdefault(v, set()).add(cpu)
    tap(bool(apic) and set(kvm) == set(apic.values()), "kvm_vcpu_ids_are_apic_ids",
        "kvm_entry vcpu ids %s, guest APIC IDs %s" % (sorted(kvm), sorted(apic.values())))
    tap(len(guest) >= 100, "guest_events", "%d guest events, %d host events" % (len(guest), nhost))
    unmapped = [e for e in guest if e["args"].get("mapping") == "none"]
    tap(not unmapped, "all_mapped", "%d of %d guest events unmapped" % (len(unmapped), len(guest)))
    moved = all(len(c) >= 2 for c in host_cpus.values()) and host_cpus
    tap(bool(moved), "vcpus_moved",
        "host CPUs per vCPU: " + ", ".join("v%d %s" % (v, sorted(c)) for v, c in host_cpus.items()))

    import bisect
    keys = {v: [k[0] for k in kvm[v]] for v in kvm}
    inside = outside = cpu_ok = cpu_bad = edge = 0
    examples = []
    for e in guest:
        v, t = apic.get(e["tid"], e["tid"]), ns(e["ts"])
        if v not in keys or not keys[v]:
            edge += 1
            continue
        i = bisect.bisect_right(keys[v], t) - 1
        if i < 0 or i + 1 >= len(keys[v]):
            edge += 1           # before the host's first or after its last KVM event
            continue
        ts0, entry, cpu = kvm[v][i]
        ts1, entry1, _ = kvm[v][i + 1]
        if entry and not entry1:
            inside += 1
            if e["args"]["host_cpu"] == cpu:
                cpu_ok += 1
            else:
                cpu_bad += 1
                if len(examples) < 5:
                    examples.append("v%d at %d: annotated host CPU %s, kvm_entry on %d" %
                                    (v, t, e["args"]["host_cpu"], cpu))
        else:
            outside += 1
            if len(examples) < 5:
                examples.append("v%d at %d (+-%s ns) outside guest mode: previous %s at %d, next %s at %d" %
                                (v, t, e["args"].get("bound_ns"), "entry" if entry else "exit", ts0,
                                 "entry" if entry1 else "exit", ts1))
    for x in examples:
        print("# " + x)
    checked = inside + outside
    tap(checked >= 0.9 * len(guest) and checked > 0, "checked_against_host",
        "%d of %d guest events inside the host trace's span (%d at its edges)" % (checked, len(guest), edge))
    tap(outside == 0 and checked > 0, "inside_guest_mode",
        "%d guest events between their vCPU's kvm_entry and kvm_exit, %d outside" % (inside, outside))
    tap(cpu_bad == 0 and cpu_ok > 0, "host_cpu_matches_kvm_entry",
        "%d guest events on the host CPU of their kvm_entry, %d not" % (cpu_ok, cpu_bad))
    app_placement(apps, happ_ev, gapp_ev, apic, kvm, keys, guest, d)
    perf_placement(apps, hperf_ev, gperf_ev, apic, kvm, keys, d)
    if "--report" in apps:
        perf_report(report, hperf_ev, gperf_ev)

    # The text timeline: one line per event (plus drop notices), host order.
    last, lines, back = 0, 0, 0
    with open(txt) as f:
        for line in f:
            if "EVENTS DROPPED]" in line:
                continue
            lines += 1
            # An event's time follows its "[cpu]"; a DISRUPTION line (a
            # guest the emulator killed while the recording ran) has no
            # CPU: the first "seconds.nanoseconds:" field either way.
            m = TEXT_TIME.search(line)
            if not m:
                tap(False, "text_line_parsed", "no time in: %s" % line.strip()[:120])
                continue
            v = int(m.group(1)) * 10**9 + int(m.group(2))
            if v < last:
                back += 1
            last = max(last, v)
    nev = sum(1 for e in trace["traceEvents"] if e.get("ph") == "i" or e.get("cat") in ("app", "perf"))
    tap(lines == nev, "text_has_every_event", "%d text lines, %d JSON events" % (lines, nev))
    tap(back == 0, "text_in_host_order", "%d lines earlier than the one before" % back)
    marker_placement(tool, corr, d, guest)
    # The host's interrupts as the analysis's offenders (when traced).
    if analyze_irq_bounds(host, ajs, tid_vcpu, apic) is None:
        skip("analyze_irq_bounds", "the host trace has no irq:irq_handler_entry or irq:softirq_entry "
             "(HGCLOCK_MERGE_HOST_EVENTS)")
    # Each vCPU's split, and each exit, as the analysis counts and times
    # them, against the host trace.
    analyze_vcpu_split(tool, d, tid_vcpu, apic)
    if analyze_exits(host, ajs, guest, tid_vcpu, apic) is False:
        tap(False, "analyze_exits", "no guest thread lived wholly inside the recording")
    tc = tracecmd_placement(d, guest)
    if tc and has_timeshift(guest_path(d)) is False:
        print("# trace-cmd wrote no TimeShift into the guest's file (its time sync did not finish): "
              "its report shows the guest's own clock, %d of %d events %d ns from hgclock's (median)"
              % (tc[2], len(guest), tc[0]))
    elif tc:
        print("# trace-cmd's own placement of the same %d guest events (its TimeShift): "
              "off by median %d ns, max %d ns" % (tc[2], tc[0], tc[1]))
    # Nothing lost: as many events as trace-cmd report shows for each file.
    for name, path, want in (("host", host, nhost), ("guest", guest_path(d), len(guest))):
        r = tracecmd_report(path)
        count = sum(1 for l in r.stdout.splitlines() if l.strip() and not l.startswith("cpus=")
                    and "EVENTS DROPPED" not in l)
        tap(r.returncode == 0 and count == want, "no_event_lost_" + name,
            "trace-cmd report: %d events, hgclock merge: %d" % (count, want))


def in_guest_mode(name, what, evs, vcpu_of, apic, kvm, keys):
    """Test @name: every guest event of @evs (@what, plural) that is
    mapped (not "none") is kvm-exact and lies between a kvm_entry and the
    next kvm_exit of its vCPU on the host CPU the merge names; none is
    unmapped between mapped ones; events at the host trace's edges are
    counted, not judged."""
    import bisect
    mapped = [e for e in evs if e["args"].get("mapping") not in (None, "none")]
    raw = [int(e["args"]["guest_ts"]) for e in mapped]
    gaps = sum(1 for e in evs if e["args"].get("mapping") in (None, "none") and raw and
               min(raw) < int(e["args"]["guest_ts"]) < max(raw))
    exact = sum(1 for e in mapped if e["args"]["mapping"] == "kvm-exact")
    inside = outside = cpu_bad = edge = 0
    for e in mapped:
        c = vcpu_of(e)
        v, t = apic.get(c, c), ns(e["ts"])
        i = bisect.bisect_right(keys.get(v, []), t) - 1
        if v not in keys or i < 0 or i + 1 >= len(keys[v]):
            edge += 1
            continue
        ts0, entry, cpu = kvm[v][i]
        if entry and not kvm[v][i + 1][1]:
            inside += 1
            cpu_bad += e["args"]["host_cpu"] != cpu
        else:
            outside += 1
    tap(not gaps and exact == len(mapped) and inside > 0 and outside == 0 and cpu_bad == 0,
        name,
        "%d of %d %s mapped (%d kvm-exact, %d unmapped within the mapped span); of those in "
        "the host trace's span %d in guest mode on their kvm_entry's host CPU, %d outside, "
        "%d on another CPU (%d at the edges)" %
        (len(mapped), len(evs), what, exact, gaps, inside, outside, cpu_bad, edge))


def why_file(logs, name):
    """': ' + the text of LOGS/NAME (the scenario's words on a missing file), or ''."""
    try:
        with open(os.path.join(logs, name)) as f:
            return ": " + f.read().strip()
    except OSError:
        return ""


def perf_placement(apps, hperf_ev, gperf_ev, apic, kvm, keys, logs):
    """perf's samples (merge --perf, --guest-perf): there on both sides;
    each guest sample, taken while its vCPU ran the guest, in guest mode
    on the host CPU of its vCPU's kvm_entry.  tools/check.sh gives both
    VMs perf and says so (HGCLOCK_EXPECT_PERF=1): a missing file then
    fails, with the scenario's words on it (host-perf.why, guest-perf.why),
    unless the emulator reset the guest before its file came out
    (HGCLOCK_GUEST_APP_SKIP, a skip)."""
    expect = os.environ.get("HGCLOCK_EXPECT_PERF") == "1"
    if "--perf" not in apps:
        for name in ("perf_host_samples", "perf_guest_samples_in_guest_mode"):
            if expect:
                tap(False, name, "no host-perf.data" + why_file(logs, "host-perf.why"))
            else:
                skip(name, "no perf in the nested VMs (tools/check.sh gives them Debian's linux-perf)")
        return
    unmapped = sum(1 for e in hperf_ev if e["args"].get("mapping") == "none")
    tap(len(hperf_ev) > 0 and not unmapped, "perf_host_samples",
        "%d host perf samples (perf clock) on the local-clock timeline, %d unmapped" %
        (len(hperf_ev), unmapped))
    if "--guest-perf" not in apps:
        if os.environ.get("HGCLOCK_GUEST_APP_SKIP"):
            skip("perf_guest_samples_in_guest_mode", os.environ["HGCLOCK_GUEST_APP_SKIP"])
        elif expect:
            tap(False, "perf_guest_samples_in_guest_mode",
                "no guest-perf.txt" + why_file(logs, "guest-perf.why"))
        else:
            skip("perf_guest_samples_in_guest_mode", "no perf in the nested guest")
        return
    in_guest_mode("perf_guest_samples_in_guest_mode", "guest samples", gperf_ev,
                  lambda e: e["tid"], apic, kvm, keys)


def perf_report(path, hperf_ev, gperf_ev):
    """merge --report --sort guest,pcpu,vcpu,comm,sym: its rows add up to
    the samples of each side, and each guest row's host CPU is the one
    the timeline gives its samples (the unplaced ones under "?")."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                p = line.split(None, 6)
                rows.append((p[3], p[4], p[5], int(p[1])))
    except (OSError, ValueError, IndexError) as e:
        tap(False, "perf_report", "cannot read %s: %s" % (path, e))
        return
    host = sum(n for g, c, v, n in rows if g == "host")
    guest = sum(n for g, c, v, n in rows if g == "0")
    want = {}
    for e in gperf_ev:
        hc = e["args"].get("host_cpu", -1)
        k = ("?" if hc is None or hc < 0 else str(hc), str(e["tid"]))
        want[k] = want.get(k, 0) + 1
    got = {}
    for g, c, v, n in rows:
        if g == "0":
            got[(c, v)] = got.get((c, v), 0) + n
    tap(host == len(hperf_ev) and guest == len(gperf_ev) and got == want, "perf_report",
        "%d rows: host %d samples (timeline %d), guest %d (timeline %d); guest samples by "
        "(host CPU, vCPU): %s" % (len(rows), host, len(hperf_ev), guest, len(gperf_ev),
                                  " ".join("%s/%s:%d" % (k[0], k[1], n) for k, n in sorted(got.items()))))


def app_placement(apps, happ_ev, gapp_ev, apic, kvm, keys, guest_events, logs):
    """The applications' events (hgclock_events_open(3), the example
    program on both sides): there, every guest one mapped, and each in
    guest mode on the host CPU of its vCPU's kvm_entry as the trace's
    events are; every thread's slices begin and end in turn."""
    import bisect
    if "--app" not in apps:
        tap(False, "app_host_events", "the host's application wrote no file")
        return
    # The host's: its events all on the timeline, in the traces' clock.
    unmapped = sum(1 for e in happ_ev if e["args"].get("mapping") == "none")
    tap(len(happ_ev) > 0 and not unmapped, "app_host_events",
        "%d host application events, %d unmapped" % (len(happ_ev), unmapped))
    if "--guest-app" not in apps:
        # The guest's events come out through the guestout 9p share
        # (merge-guest.sh); tools/check.sh gives the guest the program and
        # says so (HGCLOCK_EXPECT_GUEST_APP=1): then a missing file fails.
        # tools/check.sh says HGCLOCK_GUEST_APP_SKIP=REASON when the
        # emulator reset the guest after the recording, before its file
        # could come out: a skip with that reason, not a pass.
        why = why_file(logs, "guest-app.why")
        for name in ("app_guest_events_in_guest_mode", "app_brackets_syscall"):
            if os.environ.get("HGCLOCK_GUEST_APP_SKIP"):
                skip(name, os.environ["HGCLOCK_GUEST_APP_SKIP"])
            elif os.environ.get("HGCLOCK_EXPECT_GUEST_APP") == "1":
                tap(False, name, "no guest-app.hgev: the guest's application or its 9p "
                    "share (guestout) failed%s (guest-console.log)" % why)
            else:
                skip(name, "no guest application events (the guest had no hgclock-events)")
        slices_nest(happ_ev)
        return
    # The application ran longer than the recording: its events before
    # the first and after the last mapping are unmapped, none between.
    in_guest_mode("app_guest_events_in_guest_mode", "guest application events", gapp_ev,
                  lambda e: e["args"]["vcpu"], apic, kvm, keys)
    slices_nest(happ_ev, gapp_ev)
    syscall_brackets(gapp_ev, guest_events)


def slices_nest(*lists):
    """Every thread's slices begin and end in turn."""
    bad = 0
    for evs in lists:
        depth = {}
        for e in sorted(evs, key=lambda x: ns(x["ts"])):
            k = (e["pid"], e["tid"])
            if e["ph"] == "B":
                bad += depth.get(k, 0) != 0
                depth[k] = 1
            elif e["ph"] == "E":
                bad += depth.get(k, 0) != 1
                depth[k] = 0
    tap(bad == 0 and any(lists), "app_slices_nest", "%d begin/end out of turn in %d events" %
        (bad, sum(len(x) for x in lists)))


def syscall_brackets(gapp_ev, guest_events):
    """The example's slices are a BEGIN, a clock_nanosleep system call and
    an END, in that order on one thread: in the merged timeline (the app's
    perf clock and the trace's local clock, both mapped) each slice within
    the guest trace's span holds that thread's sys_enter and sys_exit of
    the call, in order.  Exact mappings cannot fail this; an error of a
    microsecond could."""
    import bisect
    calls = {}
    for e in guest_events:
        if e["name"] in ("sys_enter_clock_nanosleep", "sys_exit_clock_nanosleep"):
            calls.setdefault(e["args"]["pid"], []).append(
                (ns(e["ts"]), e["name"] == "sys_enter_clock_nanosleep"))
    for v in calls.values():
        v.sort()
    if not guest_events:
        tap(False, "app_brackets_syscall", "no guest trace events")
        return
    lo, hi = min(ns(e["ts"]) for e in guest_events), max(ns(e["ts"]) for e in guest_events)
    begin = {}
    good = bad = skipped = 0
    examples = []
    for e in sorted(gapp_ev, key=lambda x: ns(x["ts"])):
        if e["args"].get("mapping") in (None, "none") or e["ph"] not in ("B", "E"):
            continue
        tid = e["args"]["tid"]
        if e["ph"] == "B":
            begin[tid] = ns(e["ts"])
            continue
        b, t = begin.pop(tid, None), ns(e["ts"])
        if b is None or b < lo or t > hi:
            skipped += 1
            continue
        c = calls.get(tid, [])
        i = bisect.bisect_left(c, (b, False))
        inside = [x for x in c[i:] if x[0] <= t]
        if len(inside) >= 2 and inside[0][1] and not inside[-1][1]:
            good += 1
        else:
            bad += 1
            if len(examples) < 3:
                examples.append("tid %d slice %d..%d: %s" % (tid, b, t, inside[:4]))
    for x in examples:
        print("# " + x)
    tap(good > 0 and bad == 0, "app_brackets_syscall",
        "%d slices hold their thread's clock_nanosleep entry and exit in order, %d do not "
        "(%d outside the guest trace)" % (good, bad, skipped))


def marker_placement(tool, corr, d, guest_events):
    """The marker method (the guest's pairmark markers in its trace.dat and
    the host's EXIT_HOST records) against kvm-exact, on the same guest
    events: hgclock convert --method marker --markers on up to 2000 of the
    events merge mapped kvm-exact (exact to 1-2 ns), each answer's
    distance from the kvm-exact host time against its stated bound."""
    exact = [e for e in guest_events if e["args"].get("mapping") == "kvm-exact"]
    step = max(1, len(exact) // 2000)
    sample = exact[::step][:2000]
    lines = "".join("%d %d\n" % (e["tid"], int(e["args"]["guest_ts"])) for e in sample)
    p = checkrun.run([tool, "convert", corr, "--guest", "0", "--clock", "local", "--json",
                      "--method", "marker", "--markers", guest_path(d)],
                     input=lines, capture_output=True, text=True)
    m = re.search(r"(\d+) marker pairings on '(\S+)' from (\d+) markers", p.stderr)
    pairs = int(m.group(1)) if m else 0
    tap(p.returncode == 0 and pairs > 0, "marker_pairs",
        "%d marker pairings from %s markers (exit %d)%s" %
        (pairs, m.group(3) if m else "no", p.returncode,
         "" if m else ": " + p.stderr.strip().replace("\n", " | ")[:300]))
    if p.returncode or not pairs:
        tap(False, "marker_within_bound", "no marker pairings to measure")
        return
    errs, bounds, outside, unmapped, unbounded = [], [], [], 0, 0
    for e, line in zip(sample, p.stdout.splitlines()):
        r = json.loads(line)
        if "host_value" not in r:
            unmapped += 1
            continue
        if r["bound_ns"] is None:
            unbounded += 1
            continue
        err = abs(r["host_value"] - ns(e["ts"]))
        # The kvm-exact time itself is exact to 1-2 ns (sync.rst).
        if err > r["bound_ns"] + 2:
            outside.append("v%d guest %s: off %d ns, bound %d ns" %
                           (e["tid"], e["args"]["guest_ts"], err, r["bound_ns"]))
        errs.append(err)
        bounds.append(r["bound_ns"])
    for x in outside[:5]:
        print("# " + x)
    errs.sort()
    bounds.sort()
    tap(errs and not outside, "marker_within_bound",
        "%d of %d kvm-exact events mapped by markers with a bound (%d unmapped: before the "
        "first or after the last pairing, %d without a bound), %d beyond it; error median %d ns, "
        "max %d ns; bound median %d ns, max %d ns" %
        (len(errs), len(sample), unmapped, unbounded, len(outside),
         errs[len(errs) // 2] if errs else -1, errs[-1] if errs else -1,
         bounds[len(bounds) // 2] if bounds else -1, bounds[-1] if bounds else -1))


def tracecmd_placement(d, guest_events):
    """trace-cmd's own placement of the guest events (its TimeShift, from
    its ptp probing) against hgclock's: (median, max) |difference| in ns
    over the events both place, or None.  hgclock's mapping is exact to
    its stated bound (a few ns), so this is trace-cmd's error."""
    ours = {(e["tid"], int(e["args"]["guest_ts"])): ns(e["ts"]) for e in guest_events
            if e["args"].get("mapping") not in (None, "none")}
    diffs = []
    for cpu, g, t in shifted_times(guest_path(d)):
        h = ours.get((cpu, g))
        if h is not None:
            diffs.append(abs(t - h))
    if not diffs:
        return None
    diffs.sort()
    return diffs[len(diffs) // 2], diffs[-1], len(diffs)


REPORT_LINE = re.compile(r"^\s*(.*?)-(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(\w+):\s*(.*)$")


_reports = {}


def tracecmd_report(path):
    """trace-cmd report -t of @path, run once per file (the interrupt
    bounds and the event counts read the same host report)."""
    if path not in _reports:
        _reports[path] = checkrun.run(["trace-cmd", "report", "-t", "-i", path], capture_output=True,
                                      text=True)
    return _reports[path]


_events = {}


def report_events(r):
    """The events of a trace-cmd report -t run (@r): (pid, cpu, name,
    the rest of the line, ns), in the report's order; parsed once per
    report (the analysis checks each read the host's)."""
    if id(r) not in _events:
        _events[id(r)] = (r, [(int(m.group(2)), int(m.group(3)), m.group(6), m.group(7),
                               int(m.group(4)) * 10**9 + int(m.group(5)))
                              for m in map(REPORT_LINE.match, r.stdout.splitlines()) if m])
    return _events[id(r)][1]


class Union:
    """A union of [a, b) intervals, for the length of its part inside a
    window in O(log n) (what a scan of the clipped intervals gave) for a long recording's
    hundred thousand interrupts and exits, which a scan of every interval
    per window made quadratic (half an hour on make demo's recording)."""

    def __init__(self, ivs):
        self.starts, self.ends, self.before = [], [], [0]
        for a, b in sorted(ivs):
            if b <= a:
                continue
            if self.ends and a <= self.ends[-1]:
                if b > self.ends[-1]:
                    self.before[-1] += b - self.ends[-1]
                    self.ends[-1] = b
                continue
            self.starts.append(a)
            self.ends.append(b)
            self.before.append(self.before[-1] + b - a)

    def within(self, lo, hi):
        """The length of the union inside [lo, hi)."""
        if hi <= lo:
            return 0
        i = bisect.bisect_right(self.ends, lo)         # the first ending after lo
        j = bisect.bisect_left(self.starts, hi)         # past the last starting before hi
        if i >= j:
            return 0
        total = self.before[j] - self.before[i]
        total -= max(0, lo - self.starts[i])
        total -= max(0, self.ends[j - 1] - hi)
        return total


def any_within(sorted_ts, lo, hi):
    """Is there a t in sorted_ts with lo < t < hi?"""
    k = bisect.bisect_right(sorted_ts, lo)
    return k < len(sorted_ts) and sorted_ts[k] < hi


def analyze_irq_bounds(host, ajs, tid_vcpu, apic):
    """The analysis's interrupts (--analyze-json's vCPU "preempted_by"
    entries with tid null) against the host's own irq events, read here
    from trace-cmd report, not from merge.  For each vCPU thread:

    lower: every IRQ/softirq interval on host CPU c inside one of the
    thread's exits (not HLT) whose kvm_exit and next kvm_entry are both
    on c with no sched_switch on c between them (the thread ran there
    all along): analyze.rst says all of it is the interrupt's;
    upper: the interrupts' time (on any CPU) inside the thread's exits
    (not HLT) and before its first kvm_entry: the only times the vCPU
    can be "in an exit" or "preempted", where alone an interrupt is
    charged to it.

    Returns None when the host did not trace its interrupts."""
    r = tracecmd_report(host)
    if r.returncode:
        tap(False, "analyze_irq_bounds", "trace-cmd report -t: exit %d" % r.returncode)
        return True
    irq_open, irqs, switch_ts = {}, {}, {}
    th = {}     # tid -> {"exits": [(x, e, cpu_x, cpu_e)], "first": ts, "entry1": ts, "open": (x, cpu)}
    end = 0
    nirq = 0
    names = {}
    for pid, cpu, name, rest, t in report_events(r):
        end = max(end, t)
        if name in ("irq_handler_entry", "softirq_entry"):
            nirq += 1
            key = "irq" if name == "irq_handler_entry" else "softirq"
            irq_open[(cpu, key)] = t
            mm = re.search(r"irq=(\d+) name=(\S+)", rest)
            if mm:
                names.setdefault(int(mm.group(1)), set()).add(mm.group(2))
        elif name in ("irq_handler_exit", "softirq_exit"):
            key = "irq" if name == "irq_handler_exit" else "softirq"
            t0 = irq_open.pop((cpu, key), None)
            if t0 is not None:
                irqs.setdefault(cpu, []).append((t0, t))
        elif name == "sched_switch":
            switch_ts.setdefault(cpu, []).append(t)
        elif name in ("kvm_entry", "kvm_exit") and pid in tid_vcpu:
            s = th.setdefault(pid, {"exits": [], "first": t, "entry1": None, "open": None})
            if name == "kvm_exit":
                hlt = re.search(r"reason (EXIT_)?HLT\b", rest, re.I) is not None
                s["open"] = None if hlt else (t, cpu)
            else:
                if s["entry1"] is None:
                    s["entry1"] = t
                if s["open"]:
                    s["exits"].append((s["open"][0], t, s["open"][1], cpu))
                s["open"] = None
    if not nirq:
        return None
    # An interrupt still open at the end runs to the end (as an upper bound).
    for (cpu, _), t0 in irq_open.items():
        irqs.setdefault(cpu, []).append((t0, end))
    all_irqs = Union(iv for ivs in irqs.values() for iv in ivs)
    cpu_irqs = {cpu: Union(ivs) for cpu, ivs in irqs.items()}
    no_irqs = Union([])
    for ts in switch_ts.values():
        ts.sort()
    with open(ajs) as f:
        an = json.load(f)
    got = {}
    for v in an.get("vcpus", []):
        got[(v["guest"], v["vcpu"])] = sum(o["ns"] for o in v["split"]["preempted_by"]
                                          if o.get("tid") is None and ("irq" in o or "softirq" in o))
    ok, lines, lower_total = True, [], 0
    cpu_of_apic = {a: c for c, a in apic.items()}
    for pid, s in sorted(th.items()):
        if s["open"]:
            s["exits"].append((s["open"][0], end, s["open"][1], None))
        lower = 0
        for x, e, cx, ce in s["exits"]:
            if cx != ce or any_within(switch_ts.get(cx, []), x, e):
                continue
            lower += cpu_irqs.get(cx, no_irqs).within(x, e)
        spans = [(x, e) for x, e, _, _ in s["exits"]]
        if s["entry1"] is not None and s["first"] < s["entry1"]:
            spans.append((s["first"], s["entry1"]))
        upper = sum(all_irqs.within(a, b) for a, b in spans)
        vcpu = cpu_of_apic.get(tid_vcpu[pid], tid_vcpu[pid])
        a = got.get((0, vcpu))
        good = a is not None and lower <= a <= upper
        ok = ok and good
        lower_total += lower
        lines.append("vCPU %d (thread %d): %d <= %s <= %d ns" % (vcpu, pid, lower, a, upper))
    # Every IRQ named as the analysis names it: "irq N (name)" from the
    # trace's own irq_handler_entry name for N.
    bad_names = []
    for v in an.get("vcpus", []):
        for o in v["split"]["preempted_by"]:
            if "irq" in o and o["comm"] not in names.get(o["irq"], set()):
                bad_names.append("irq %d named %s, the trace says %s" %
                                 (o["irq"], o["comm"], sorted(names.get(o["irq"], []))))
    tap(ok and bool(th), "analyze_irq_bounds",
        "%d IRQ/softirq entries on the host; per vCPU, the interrupts inside its exits on its "
        "own CPU <= the analysis's interrupt time <= the interrupts in its exits anywhere: %s"
        % (nirq, "; ".join(lines)))
    tap(not bad_names, "analyze_irq_names", "; ".join(bad_names[:4]) or
        "every IRQ the analysis names has the trace's name for its number")
    if not lower_total:
        print("# analyze_irq_bounds: no interrupt fell inside an exit on its vCPU's CPU: "
              "the lower bound proved nothing")
    return True


GUEST_SWITCH_INFO = re.compile(r"^(.*):(-?\d+) \[-?\d+\] (\S+) ==> (.*):(-?\d+) \[-?\d+\]$")


def exit_reason(rest):
    """kvm_exit's reason as the analysis names it: "EXIT_CPUID" (SVM) or
    "CPUID" (VMX) -> "CPUID"."""
    m = re.search(r"reason (\S+)", rest)
    if not m:
        return None
    r = m.group(1).upper()
    return r[5:] if r.startswith("EXIT_") else r


class HostCpus:
    """Each host CPU's running task and interrupts, followed as
    analyze.rst's rules follow them: a sched_switch puts its next task on
    the CPU and ends the interrupt still open there, as a kvm_entry does
    on its CPU; an IRQ or softirq runs from its entry to its exit; a KVM
    event of a vCPU thread (@tid_vcpu) says the thread runs on that CPU.
    Feed it every event of a trace-cmd report in order (event())."""

    def __init__(self, tid_vcpu):
        self.tid_vcpu = tid_vcpu
        self.on_cpu = {}        # host CPU -> the task running there
        self.irq_on = {}        # host CPU -> set of "i"/"s" interrupts running there

    def irq(self, cpu):
        return bool(self.irq_on.get(cpu))

    def event(self, pid, cpu, name, rest):
        """Follows one event; a sched_switch's (prev, prev_state, next)."""
        if name == "sched_switch":
            self.irq_on.pop(cpu, None)
            mm = GUEST_SWITCH_INFO.match(rest.strip())
            if mm:
                self.on_cpu[cpu] = int(mm.group(5))
                return int(mm.group(2)), mm.group(3), int(mm.group(5))
        elif name in ("irq_handler_entry", "softirq_entry"):
            self.irq_on.setdefault(cpu, set()).add(name[0])
        elif name in ("irq_handler_exit", "softirq_exit"):
            self.irq_on.get(cpu, set()).discard(name[0])
        elif name in ("kvm_exit", "kvm_entry") and pid in self.tid_vcpu:
            for c in [c for c, task in self.on_cpu.items() if task == pid and c != cpu]:
                del self.on_cpu[c]
            self.on_cpu[cpu] = pid
            if name == "kvm_entry":
                self.irq_on.pop(cpu, None)
        return None


def analyze_exits(host, ajs, guest, tid_vcpu, apic):
    """The analysis's exits (--analyze-json's per-thread "exits" and
    "exit_reasons") against the host trace, read by trace-cmd report, not
    by merge, for every guest thread whose whole time on its vCPUs lies
    inside the recording (each of its intervals opened and closed by a
    guest sched_switch, between its vCPU thread's first and last KVM
    event on the host): short-lived processes, for one, whose C library
    runs the same CPUIDs at every start.

    A guest thread can only change in guest mode, so each exit (not HLT)
    of a vCPU lies wholly inside one guest thread's interval on it: the
    thread's exits are its vCPU thread's kvm_exit events inside its
    intervals, each to the next kvm_entry.  Counts, per reason, must be
    equal.  An exit's time is analyze.rst's, recomputed here from the
    host's own events: the part of it in which the vCPU thread runs on a
    host CPU (its sched_switch, or a KVM event there) with no interrupt
    running on that CPU (an IRQ or softirq, ended by its exit, a
    sched_switch or a kvm_entry there).  Each thread's sum must match the
    analysis's within 2 x the mapping's bound x its intervals.  Returns
    False when no thread qualified."""
    r = tracecmd_report(host)
    if r.returncode:
        tap(False, "analyze_exits", "trace-cmd report -t: exit %d" % r.returncode)
        return True
    vcpu_tid = {v: t for t, v in tid_vcpu.items()}
    exits = {}          # host vCPU tid -> [(t_exit, t_entry, ns, reason)]
    open_exit = {}      # host vCPU tid -> [t_exit, reason, ns so far]
    span = {}           # host vCPU tid -> [first, last] KVM event
    cpus = HostCpus(tid_vcpu)
    last = None
    for pid, cpu, name, rest, t in report_events(r):
        # The time since the last event, to each open exit whose thread
        # runs where no interrupt does.
        if last is not None and open_exit and t > last:
            for c, task in cpus.on_cpu.items():
                o = open_exit.get(task)
                if o is not None and not cpus.irq(c):
                    o[2] += t - last
        last = t if last is None else max(last, t)
        cpus.event(pid, cpu, name, rest)
        if name in ("kvm_exit", "kvm_entry") and pid in tid_vcpu:
            sp = span.setdefault(pid, [t, t])
            sp[1] = t
            if name == "kvm_exit":
                reason = exit_reason(rest)
                if reason == "HLT":
                    open_exit.pop(pid, None)
                else:
                    open_exit[pid] = [t, reason, 0]
            else:
                o = open_exit.pop(pid, None)
                if o:
                    exits.setdefault(pid, []).append((o[0], t, o[2], o[1]))
    for pid in exits:
        exits[pid].sort()
    # The guest's threads' intervals, per guest CPU, in host time.
    ivs, incomplete, cur = {}, set(), {}
    bound = 0
    for e in sorted((e for e in guest if e["name"] == "sched_switch"), key=lambda e: ns(e["ts"])):
        m = GUEST_SWITCH_INFO.match(e["args"].get("info", ""))
        if not m:
            continue
        c, t = e["tid"], ns(e["ts"])
        bound = max(bound, int(e["args"].get("bound_ns") or 0))
        prev, nxt = int(m.group(2)), int(m.group(5))
        if c in cur:
            p, t0 = cur[c]
            if p == prev:
                ivs.setdefault(prev, []).append((c, t0, t))
            else:
                incomplete.update((p, prev))     # a switch lost in between
        else:
            incomplete.add(prev)                 # running since before the trace
        cur[c] = (nxt, t)
    for p, _ in cur.values():
        incomplete.add(p)                        # still running at the end
    with open(ajs) as f:
        an = json.load(f)
    threads = {t["tid"]: t for t in an.get("threads", []) if t.get("guest") == 0}
    checked = bad = n_exits = 0
    want_sum = got_sum = 0
    cpuid_counts = {}
    examples = []
    for tid, tivs in sorted(ivs.items()):
        if tid in incomplete or tid == 0 or tid not in threads:
            continue
        vts = [vcpu_tid.get(apic.get(c, c)) for c, _, _ in tivs]
        if any(vt not in span or not (span[vt][0] < a and b < span[vt][1])
               for vt, (_, a, b) in zip(vts, tivs)):
            continue
        want, want_ns = {}, 0
        for vt, (c, a, b) in zip(vts, tivs):
            xs = exits.get(vt, [])
            k = bisect.bisect_left(xs, (a,))
            while k < len(xs) and xs[k][0] < b:
                _, _, x_ns, reason = xs[k]
                k += 1
                want[reason] = want.get(reason, 0) + 1
                want_ns += x_ns
                n_exits += 1
        split = threads[tid]["split"]
        got = {x["reason"]: x["count"] for x in split.get("exit_reasons", [])}
        got_ns = split.get("exits", 0)
        tol = 2 * bound * len(tivs)
        checked += 1
        want_sum += want_ns
        got_sum += got_ns
        if "CPUID" in want:
            cpuid_counts.setdefault((threads[tid].get("comm"), want["CPUID"]), []).append(tid)
        if got != want or abs(got_ns - want_ns) > tol:
            bad += 1
            if len(examples) < 4:
                examples.append("thread %d (%s), %d intervals: analysis %s, %d ns; host trace %s, %d ns"
                                % (tid, threads[tid].get("comm"), len(tivs), sorted(got.items()),
                                   got_ns, sorted(want.items()), want_ns))
    if not checked:
        return False
    for x in examples:
        print("# analyze_exits: " + x)
    # The same program, the same CPUIDs at each start (its C library's).
    common = sorted(((len(v), comm, cnt) for (comm, cnt), v in cpuid_counts.items()), reverse=True)[:3]
    print("# analyze_exits: CPUID exits per thread, the most frequent: " +
          ", ".join("%d threads of %s with %d" % x for x in common))
    tap(bad == 0 and n_exits > 0, "analyze_exits",
        "%d guest threads whose whole life the recording holds, %d exits (not HLT) in their "
        "intervals by the host trace; each thread's count per reason equal and its exit time "
        "within 2 x %d ns x its intervals (sums: analysis %d ns, host trace %d ns); %d threads off"
        % (checked, n_exits, bound, got_sum, want_sum, bad))
    return True


COMPONENTS = ("guest", "exits", "preempted", "host_blocked", "halted", "disrupted", "unknown")


def analyze_vcpu_split(tool, d, tid_vcpu, apic):
    """Each vCPU's split (--analyze-json's "vcpus"), recomputed from the
    host trace alone (trace-cmd report, not merge) by analyze.rst's
    rules, component by component, and its interrupts' time: from the
    vCPU thread's first event, each nanosecond to halted (a HLT exit to
    the next kvm_entry), preempted (switched out runnable), host_blocked
    (switched out asleep), guest (kvm_entry to kvm_exit) or exits (a
    kvm_exit to the next kvm_entry, running), unknown before its first
    KVM event; an IRQ or softirq on the CPU the thread runs on in an
    exit, or left runnable, makes that time preempted by the interrupt.
    A KVM event says where its thread runs; a sched_switch or a
    kvm_entry on a CPU ends the interrupt still open there.  The
    analysis ends at the last event it read (of any input): the time
    after the host trace's last event goes to each vCPU's last state,
    the same for every vCPU.  Everything else must be equal.

    The window starts at the last of the vCPU threads' first KVM events
    (merge --from): before a vCPU's first KVM event the analysis knows
    its thread only from the guest's side, which is not this check's
    truth, and from then on the state of every vCPU is the host trace's."""
    host = os.path.join(d, "host.dat")
    r = tracecmd_report(host)
    if r.returncode:
        tap(False, "analyze_vcpu_split", "trace-cmd report -t: exit %d" % r.returncode)
        return
    first = {}
    for pid, _, name, _, t in report_events(r):
        if name in ("kvm_exit", "kvm_entry") and pid in tid_vcpu and pid not in first:
            first[pid] = t
    if not first:
        tap(False, "analyze_vcpu_split", "no KVM event of a vCPU thread in the host trace")
        return
    from_ns = max(first.values())
    ajs = os.path.join(d, "analyze-from.json")
    p = checkrun.run([tool, "merge", os.path.join(d, "merge.hgc"), host, guest_path(d),
                      "--no-text", "--analyze-json", ajs, "--from", "%d.%09d" % divmod(from_ns, 10**9),
                      "-q", "--no-progress", "--force"], capture_output=True, text=True)
    if p.returncode:
        tap(False, "analyze_vcpu_split", "hgclock merge --from: exit %d: %s"
            % (p.returncode, p.stderr.strip()[-300:]))
        return
    comp, st = {}, {}       # vCPU tid -> {component: ns}, {"mode", "sched"}
    cpus = HostCpus(tid_vcpu)
    last = None

    def component(s):
        if s["mode"] == "halt":
            return "halted"
        kind, cpu = s["sched"] or (None, None)
        if kind == "R":
            return "irq" if cpus.irq(cpu) else "preempted"
        if kind == "S":
            return "host_blocked"
        if s["mode"] is None or kind is None:
            return "unknown"
        if s["mode"] == "guest":
            return "guest"
        return "irq" if cpus.irq(cpu) else "exits"

    for pid, cpu, name, rest, t in report_events(r):
        if last is not None and t > max(last, from_ns):
            for tid, s in st.items():
                k = component(s)
                comp[tid][k] = comp[tid].get(k, 0) + t - max(last, from_ns)
        last = t if last is None else max(last, t)
        switch = cpus.event(pid, cpu, name, rest)
        if switch:
            prev, state, nxt = switch
            for tid in (prev, nxt):
                if tid in tid_vcpu and tid not in st:
                    st[tid], comp[tid] = {"mode": None, "sched": None}, {}
            if prev in st:
                st[prev]["sched"] = ("R" if state.startswith("R") else "S", cpu)
            if nxt in st:
                st[nxt]["sched"] = ("run", cpu)
        elif name in ("kvm_exit", "kvm_entry") and pid in tid_vcpu:
            if pid not in st:
                st[pid], comp[pid] = {"mode": None, "sched": None}, {}
            s = st[pid]
            s["sched"] = ("run", cpu)
            if name == "kvm_exit":
                s["mode"] = "halt" if exit_reason(rest) == "HLT" else "exit"
            else:
                s["mode"] = "guest"
    with open(ajs) as f:
        an = json.load(f)
    got = {(v["guest"], v["vcpu"]): v["split"] for v in an.get("vcpus", [])}
    cpu_of_apic = {a: c for c, a in apic.items()}
    ok, lines, tails = bool(comp), [], set()
    for tid in sorted(comp):
        vcpu = cpu_of_apic.get(tid_vcpu[tid], tid_vcpu[tid])
        want = dict(comp[tid])
        want["preempted"] = want.get("preempted", 0) + want.get("irq", 0)
        a = got.get((0, vcpu))
        if a is None:
            ok = False
            lines.append("vCPU %d (thread %d): not in the analysis" % (vcpu, tid))
            continue
        a_irq = sum(o["ns"] for o in a.get("preempted_by", [])
                    if o.get("tid") is None and ("irq" in o or "softirq" in o))
        tail = sum(a.get(k, 0) for k in COMPONENTS) - sum(want.get(k, 0) for k in COMPONENTS)
        final = component(st[tid])
        tails.add(tail)
        diffs = []
        for k in COMPONENTS:
            extra = tail if k == ("preempted" if final == "irq" else final) else 0
            if a.get(k, 0) != want.get(k, 0) + extra:
                diffs.append("%s %d, host trace %d" % (k, a.get(k, 0), want.get(k, 0) + extra))
        if a_irq != want.get("irq", 0) + (tail if final == "irq" else 0):
            diffs.append("interrupts %d, host trace %d" % (a_irq, want.get("irq", 0)))
        ok = ok and not diffs and tail >= 0
        lines.append("vCPU %d (thread %d): %s" % (vcpu, tid, "; ".join(diffs) if diffs else
                     "guest %d, exits %d, preempted %d (interrupts %d), host_blocked %d, halted %d ns"
                     % (a.get("guest", 0), a.get("exits", 0), a.get("preempted", 0), a_irq,
                        a.get("host_blocked", 0), a.get("halted", 0))))
    ok = ok and len(tails) == 1
    tap(ok, "analyze_vcpu_split",
        "from %d.%09d, each vCPU's split and interrupt time the same to the ns as the host trace's by "
        "analyze.rst's rules (%s ns after the host trace's last event, to each vCPU's last state): %s"
        % (from_ns // 10**9, from_ns % 10**9, "/".join(str(x) for x in sorted(tails)), "; ".join(lines)))


def guest_path(d):
    return os.path.join(d, "host-guest.dat")


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
