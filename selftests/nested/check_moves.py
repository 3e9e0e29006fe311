#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks of the many-guests scenario's moving guest (selftests/nested/many.sh).

  check_moves.py blackout DISR_JSON MOVES_LOG
      DISR_JSON: the "disruption" and "disruption_facts" lines of
      `hgclock dump --json`; MOVES_LOG: what tools/vm/nested-host's
      extra_guest_migrate/_save/_restore printed, each line prefixed with
      the move's name.  The migration's and the restore's facts must give
      a blackout the host saw (the old VM's last exit before the new VM's
      first entry) and KVM's TSC jump exactly as KVM's debugfs offsets
      read by the moves on both sides.

  check_moves.py readings TOOL CORR CONSOLE THREADS "PID_A PID_B PID_C"
      CONSOLE: the moving guest's console, with its "HGMARK CPU TSC
      SCHED_NS LOCAL_NS ..." lines ("hgclock now" in the guest, in the
      order it read them); THREADS: "PID TID" lines, the vCPU threads of
      each of its VMs.  Every reading maps through guest 1 on x86-tsc
      exactly (kvm-exact, bound 0) and on the local clock by kvm-exact (bound
      at most 1 ns: one guest ns spans TSC counts of up to two host ns),
      each onto one of the vCPU threads of the VM it maps through; the
      VMs follow each other in the guest's order (none before a move is
      given to the new VM's threads), and each VM has readings.

  check_moves.py guest_mode TOOL CORR CONSOLE HOST_DAT
      HOST_DAT: trace-cmd's recording of the host's kvm_entry, and
      kvm_exit or the vCPU threads' sched_switch (clock local: host
      ns); where it has a "many" instance, only that instance's events
      (the top buffer holds what the host VM traced from its boot).
      Every reading the trace covers (after its first event), its local
      clock value mapped to host ns (within its bound), lies in a
      guest-mode interval: after a kvm_entry of the thread it maps to,
      on the host CPU it is annotated with, and before that thread's
      next event (its kvm_exit, its switch-out, or without either its
      next kvm_entry).  The readings after each move are in the new
      VM's threads' intervals (readings maps them there).

  check_moves.py merge TOOL CORR HOST_DAT DUMP OUTDIR
      hgclock merge of CORR and the host's trace HOST_DAT into OUTDIR
      (many-merged.txt, .json, .dat).  Each of dump's "disruption:"
      lines (DUMP: `hgclock dump` of CORR) is marked in every output,
      the same marks at the same times: a DISRUPTION line in the text,
      an instant in the JSON, a print event in the host's trace.dat
      (trace-cmd report, tools/dat_compare.py with the rest of the
      events).

Exit 0 when every check holds; otherwise says why on stdout, exit 1.
"""
import bisect
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import checkrun  # noqa: E402


def fail(msg):
    print("check_moves: " + msg)
    sys.exit(1)


def s64(v):
    v %= 1 << 64
    return v - (1 << 64) if v >= 1 << 63 else v


def blackout(disr_json, moves_log):
    facts = []
    kinds = []
    with open(disr_json) as f:
        for line in f:
            d = json.loads(line)
            if d.get("section") == "disruption":
                kinds.append(d["kind"])
            elif d.get("section") == "disruption_facts":
                facts.append(d)
    # The debugfs offsets each move read: "tsc-offset OLD -> NEW".
    offs = {}
    with open(moves_log) as f:
        for line in f:
            m = re.match(r"(migrate|restore): .*tsc-offset (-?\d+) -> (-?\d+)", line)
            if m:
                offs[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    want = [k for k in kinds if k in ("migration", "restore")]
    if want != ["migration", "restore"]:
        fail("disruptions %s, expected a migration then a restore" % kinds)
    if len(facts) < 2:
        fail("%d disruption_facts lines, expected 2 or more" % len(facts))
    for kind, move, f in (("migration", "migrate", facts[0]), ("restore", "restore", facts[1])):
        if move not in offs:
            fail("%s: the move printed no tsc-offset line" % move)
        old, new = offs[move]
        if "host_blackout_ns" not in f or "kvm_tsc_jump" not in f:
            fail("%s: facts without a blackout or a jump: %s" % (kind, f))
        if f["host_blackout_ns"] <= 0:
            fail("%s: a blackout of %d ns" % (kind, f["host_blackout_ns"]))
        if f["kvm_tsc_jump"] != s64(new - old):
            fail("%s: KVM's jump from the records %d, from debugfs %d (%d -> %d)" %
                 (kind, f["kvm_tsc_jump"], s64(new - old), old, new))
        print("check_moves: %s: the host saw the guest stopped for %.3f ms, the guest saw %.3f ms"
              " pass; its TSC jumped %d counts (debugfs: %d -> %d)" %
              (kind, f["host_blackout_ns"] / 1e6, f.get("guest_blackout_ns", 0) / 1e6,
               f["kvm_tsc_jump"], old, new))
    return 0


def convert(tool, corr, clock, lines):
    p = checkrun.run([tool, "convert", corr, "--guest", "1", "--clock", clock, "--json"],
                     input="".join(lines), capture_output=True, text=True, timeout=300)
    out = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if len(out) != len(lines):
        fail("convert --clock %s: %d answers for %d readings (exit %d: %s)" %
             (clock, len(out), len(lines), p.returncode, p.stderr.strip()[-300:]))
    return out


def hgmarks(console):
    """The console's "HGMARK CPU TSC SCHED_NS LOCAL_NS" readings, in order.

    Only whole lines: the eight numbers of `hgclock now`'s line, then the
    line's end.  A line the guest's death cut short (its QEMU killed
    while the serial port was sending it: seen on 2026-12-03, "HGMARK 0
    214798837198 100038158710 90058275732 15750" and no more), or one a
    kernel message broke in two, could end in a number cut short and
    would be a reading the guest never made."""
    marks = []
    cut = 0
    pat = re.compile(r"HGMARK +(\d+) +(\d+) +(\d+) +(\d+)(?: +\d+){4} *\r?\n$")
    with open(console, errors="replace", newline="") as f:
        for line in f:
            m = pat.search(line)
            if m:
                marks.append(tuple(int(x) for x in m.groups()[:4]))
            elif "HGMARK" in line:
                cut += 1
    if cut:
        print("check_moves: %d HGMARK lines not whole (cut short or broken by the kernel's"
              " messages): not readings" % cut)
    return marks


def readings(tool, corr, console, threads_path, pids_arg):
    pids = [int(x) for x in pids_arg.split()]
    threads = {}
    with open(threads_path) as f:
        for line in f:
            pid, tid = line.split()
            threads.setdefault(int(pid), set()).add(int(tid))
    marks = hgmarks(console)
    if len(marks) < 6:
        fail("%d HGMARK readings on the console, expected one a second" % len(marks))
    tsc = convert(tool, corr, "x86-tsc", ["%d %d\n" % (c, t) for c, t, _, _ in marks])
    loc = convert(tool, corr, "local", ["%d %d\n" % (c, s) for c, _, s, _ in marks])
    order = []
    per_vm = {p: 0 for p in pids}
    for i, (mk, a, b) in enumerate(zip(marks, tsc, loc)):
        if "error" in a or a["method"] != "kvm-exact" or a["bound_ns"] != 0:
            fail("reading %d (cpu %d tsc %d): %s" % (i, mk[0], mk[1], a))
        if "error" in b or b["method"] != "kvm-exact" or b["bound_ns"] is None or \
                b["bound_ns"] > 1:
            fail("reading %d (cpu %d local %d): %s" % (i, mk[0], mk[2], b))
        if a["vm_pid"] not in pids or b["vm_pid"] != a["vm_pid"]:
            fail("reading %d mapped through VM %s (local: %s), not one of %s" %
                 (i, a["vm_pid"], b["vm_pid"], pids))
        if a["host_tid"] not in threads.get(a["vm_pid"], ()):
            fail("reading %d: host thread %d is not a vCPU thread of VM %d (%s)" %
                 (i, a["host_tid"], a["vm_pid"], sorted(threads.get(a["vm_pid"], ()))))
        k = pids.index(a["vm_pid"])
        if order and k < order[-1]:
            fail("reading %d mapped through VM %d after readings through VM %d" %
                 (i, a["vm_pid"], pids[order[-1]]))
        order.append(k)
        per_vm[a["vm_pid"]] += 1
    for p in pids:
        if not per_vm[p]:
            fail("no reading mapped through VM %d (%s)" % (p, per_vm))
    print("check_moves: %d readings, all kvm-exact (x86-tsc bound 0, local bound <= 1 ns),"
          " by VM %s" % (len(marks), per_vm))
    return 0


def host_kvm_events(host_dat):
    """{tid: ([host_ns...], [(kind, cpu)...])} from trace-cmd report -t
    (clock local: ns), in time order per thread, kind "entry", "exit" or
    "out" (a sched_switch the thread made: it left the CPU); the first
    event's time; and the count of each kind.  A file with a "many"
    instance: only its lines ("many:" before the task), since the top
    buffer holds the host VM's boot-time sched_switch, which would move
    the trace's start to the boot."""
    p = checkrun.run(["trace-cmd", "report", "-t", "-i", host_dat],
                     capture_output=True, text=True, timeout=600)
    if p.returncode:
        fail("trace-cmd report %s: exit %d: %s" % (host_dat, p.returncode, p.stderr.strip()[-300:]))
    lines = p.stdout.splitlines()
    if any(l.startswith("many:") for l in lines):
        lines = [l for l in lines if l.startswith("many:")]
    ev = {}
    first = None
    counts = {"entry": 0, "exit": 0, "out": 0}
    kinds = {"kvm_entry": "entry", "kvm_exit": "exit", "sched_switch": "out"}
    # The task column is the thread that made the event: for
    # sched_switch, prev (the filter's prev_pid), the one leaving.
    pat = re.compile(r"-(\d+)\s+\[(\d+)\]\s+(?:\S+\s+)?(\d+)\.(\d+):\s+"
                     r"(kvm_entry|kvm_exit|sched_switch):")
    for line in lines:
        m = pat.search(line)
        if not m:
            continue
        tid, cpu = int(m.group(1)), int(m.group(2))
        ts = int(m.group(3)) * 10**9 + int(m.group(4).ljust(9, "0")[:9])
        first = ts if first is None else min(first, ts)
        kind = kinds[m.group(5)]
        counts[kind] += 1
        ev.setdefault(tid, []).append((ts, kind, cpu))
    out = {}
    for tid, l in ev.items():
        l.sort(key=lambda e: e[0])
        out[tid] = ([e[0] for e in l], [(e[1], e[2]) for e in l])
    return out, first, counts


def guest_mode(tool, corr, console, host_dat):
    ev, first, counts = host_kvm_events(host_dat)
    if first is None or not counts["entry"]:
        fail("no kvm_entry in %s" % host_dat)
    marks = hgmarks(console)
    loc = convert(tool, corr, "local", ["%d %d\n" % (c, s) for c, _, s, _ in marks])
    inside = before = 0
    per_vm = {}
    for i, (mk, a) in enumerate(zip(marks, loc)):
        if "error" in a or a["bound_ns"] is None or a["bound_ns"] > 1:
            fail("reading %d (cpu %d local %d): %s" % (i, mk[0], mk[2], a))
        h, tid, cpu, b = a["host_value"], a["host_tid"], a["host_cpu"], a["bound_ns"]
        if h - b < first:
            before += 1
            continue
        ts, what = ev.get(tid, ([], []))
        k = bisect.bisect_right(ts, h - b) - 1
        if k < 0:
            fail("reading %d (host ns %d, thread %d): no event of that thread before it"
                 " (its first at %s)" % (i, h, tid, ts[0] if ts else "none"))
        kind, ecpu = what[k]
        if k + 1 < len(ts) and ts[k + 1] < h + b:
            fail("reading %d (host %d +-%d ns, thread %d): its thread's next event at %d is"
                 " inside its bound" % (i, h, b, tid, ts[k + 1]))
        if kind == "exit":
            fail("reading %d (host ns %d, thread %d): in host mode, after its kvm_exit at %d" %
                 (i, h, tid, ts[k]))
        if kind == "out":
            fail("reading %d (host ns %d, thread %d): its thread was switched out of CPU %d"
                 " at %d and had not entered the guest since" % (i, h, tid, ecpu, ts[k]))
        if ecpu != cpu:
            fail("reading %d (host ns %d, thread %d): annotated host CPU %d, its kvm_entry"
                 " at %d was on CPU %d" % (i, h, tid, cpu, ts[k], ecpu))
        inside += 1
        per_vm[a["vm_pid"]] = per_vm.get(a["vm_pid"], 0) + 1
    if inside == 0 or len(per_vm) < 3:
        fail("%d readings in the trace's span, by VM %s: expected readings of all three VMs"
             % (inside, per_vm))
    if counts["exit"]:
        how = "in guest mode (after a kvm_entry, before the next kvm_exit)"
    elif counts["out"]:
        how = "after a kvm_entry and before the thread's next entry or switch-out"
    else:
        how = "after a kvm_entry and before the next one (no kvm_exit or switch-out traced)"
    print("check_moves: %d readings %s of their vCPU thread on their annotated host CPU"
          " (by VM %s), %d before the host trace began; the trace: %d kvm_entry,"
          " %d kvm_exit, %d switch-outs" %
          (inside, how, per_vm, before, counts["entry"], counts["exit"], counts["out"]))
    return 0


def merge(tool, corr, host_dat, dump, outdir):
    txt, js, dat = (os.path.join(outdir, "many-merged" + x) for x in (".txt", ".json", ".dat"))
    p = checkrun.run([tool, "merge", corr, host_dat, "-o", txt, "--json", js, "--dat", dat],
                     capture_output=True, text=True, timeout=900)
    print("check_moves: merge: " + " | ".join(p.stderr.strip().splitlines()[-3:]))
    if p.returncode:
        fail("hgclock merge: exit %d" % p.returncode)
    with open(dump) as f:
        kinds = [m.group(1) for m in (re.search(r"^disruption: .*?, (\w+): ", l) or
                                      re.search(r"^disruption: .*(never came back)", l)
                                      for l in f if l.startswith("disruption: ")) if m]
    with open(txt) as f:
        marks = [l for l in f if re.match(r"hgclock\s+\S+: DISRUPTION ", l)]
    if len(marks) != len(kinds) or not marks:
        fail("%d DISRUPTION lines in the text, dump has %d disruptions (%s)" %
             (len(marks), len(kinds), kinds))
    # The text is in time order, dump by guest: the same kinds, counted.
    def mark_kind(m):
        if "never came back" in m:
            return "never came back"
        k = re.search(r"\): (\w+), VM ", m)
        return k.group(1) if k else m.strip()
    if sorted(kinds) != sorted(mark_kind(m) for m in marks):
        fail("the text's marks (%s) are not the dump's disruptions (%s)" %
             (", ".join(mark_kind(m) for m in marks), ", ".join(kinds)))
    with open(js) as f:
        trace = json.load(f)
    inst = [e for e in trace["traceEvents"] if e.get("cat") == "hgclock" and e.get("ph") == "i"]
    if len(inst) != len(marks):
        fail("%d JSON instants, %d text marks" % (len(inst), len(marks)))
    r = checkrun.run(["trace-cmd", "report", "-t", "-i", dat], capture_output=True, text=True,
                     timeout=600)
    printed = [l for l in r.stdout.splitlines() if "hgclock: DISRUPTION" in l]
    if r.returncode or len(printed) != len(marks):
        fail("trace-cmd report of %s (exit %d): %d marks, the text %d" %
             (dat, r.returncode, len(printed), len(marks)))
    rep = os.path.join(outdir, "many-merged.report")
    with open(rep, "w") as f:
        f.write(r.stdout)
    c = checkrun.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "..", "tools", "dat_compare.py"),
                      txt, rep, dat], capture_output=True, text=True)
    if c.returncode:
        fail("dat_compare: " + c.stdout.strip().replace("\n", " | "))
    print("check_moves: %d disruptions marked in the text, the JSON and trace.dat (%s); %s" %
          (len(marks), ", ".join(kinds), c.stdout.strip()))
    print("check_moves: in trace-cmd report: " + printed[0].strip()[:200])
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "blackout":
        return blackout(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 7 and sys.argv[1] == "readings":
        return readings(*sys.argv[2:])
    if len(sys.argv) == 6 and sys.argv[1] == "guest_mode":
        return guest_mode(*sys.argv[2:])
    if len(sys.argv) == 7 and sys.argv[1] == "merge":
        return merge(*sys.argv[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
