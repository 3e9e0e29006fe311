#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks for selftests/nested/track-host.sh: compares what hgclock
recorded and lists with what qemu, KVM's debugfs and the test did.
Each sub-command exits 0 when its check holds, 1 with a reason if not."""
import json
import sys


def fail(msg):
    print("# " + msg)
    sys.exit(1)


def load_records(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except ValueError as e:
                fail("%s:%d: not JSON: %s" % (path, n, e))
    return recs


def discovery(vcpus_json, tids_file, debugfs_file, vm_name, qemu_pid):
    vcpus = [v for v in json.load(open(vcpus_json))["vcpus"] if v["kvm"]]
    tids = {int(a): int(b) for a, b in (l.split() for l in open(tids_file) if l.strip())}
    dbg = {}
    for l in open(debugfs_file):
        idx, off, ratio = l.split()
        dbg[int(idx)] = (int(off), None if ratio == "-" else int(ratio))
    if len(vcpus) != len(tids) or not vcpus:
        fail("hgclock lists %d vCPUs, qemu has %d" % (len(vcpus), len(tids)))
    for v in vcpus:
        i = v["vcpu_id"]
        if tids.get(i) != v["tid"]:
            fail("vcpu %d: hgclock tid %d, qemu's 'CPU %d/KVM' is %s" % (i, v["tid"], i, tids.get(i)))
        if v["vm"] != vm_name:
            fail("vcpu %d: vm %r, debugfs dir %r" % (i, v["vm"], vm_name))
        if v["vm_pid"] != int(qemu_pid):
            fail("vcpu %d: vm_pid %d, qemu pid %s" % (i, v["vm_pid"], qemu_pid))
        off = v["tsc_offset"]
        if off >= 1 << 63:
            off -= 1 << 64
        if dbg[i][0] != off:
            fail("vcpu %d: tsc_offset %d, debugfs %d" % (i, off, dbg[i][0]))
        if dbg[i][1] is not None and dbg[i][1] != v["tsc_scaling_ratio"]:
            fail("vcpu %d: ratio %d, debugfs %d" % (i, v["tsc_scaling_ratio"], dbg[i][1]))
        if v["tsc_scaling_ratio"] != 1 << v["tsc_frac_bits"] and dbg[i][1] is None:
            fail("vcpu %d: ratio %d is not the default 1<<%d" % (i, v["tsc_scaling_ratio"], v["tsc_frac_bits"]))
    print("# %d vCPUs match qemu's threads and debugfs" % len(vcpus))


def migrations(recs_file, tid, t0, t1, *moves):
    """Between host TSCs t0 and t1 the thread was pinned and moved only by
    the test: its migration records must be exactly those moves."""
    tid, t0, t1 = int(tid), int(t0), int(t1)
    moves = [int(m) for m in moves]
    recs = sorted((r for r in load_records(recs_file)
                   if r["type"] == "vcpu_migrate" and r["tid"] == tid and t0 < r["tsc"] < t1),
                  key=lambda r: r["tsc"])
    got = [r["to_cpu"] for r in recs]
    if got != moves:
        fail("migration records to %s, moves were %s" % (got, moves))
    for a, b in zip(recs, recs[1:]):
        if b["from_cpu"] != a["to_cpu"]:
            fail("migration from %d after a move to %d" % (b["from_cpu"], a["to_cpu"]))
    print("# %d migrations, exactly the moves" % len(got))


def tsc_write(recs_file, tid, debugfs_after, qemu_pid):
    tid = int(tid)
    after = int(debugfs_after) & ((1 << 64) - 1)
    recs = [r for r in load_records(recs_file) if r["type"] == "tsc_offset" and r["vcpu_id"] == 0]
    if not recs:
        fail("no tsc_offset record for vcpu 0")
    last = max(recs, key=lambda r: r["tsc"])
    if last["next_offset"] != after:
        fail("last offset record %d, debugfs afterwards %d" % (last["next_offset"], after))
    if last["tid"] != tid or last["vm_pid"] != int(qemu_pid):
        fail("offset change by tid %d vm %d, expected vCPU 0's thread %d in %s"
             % (last["tid"], last["vm_pid"], tid, qemu_pid))
    jump = (last["next_offset"] - last["previous_offset"]) & ((1 << 64) - 1)
    print("# offset change recorded: %d -> %d (jump %d), equals debugfs"
          % (last["previous_offset"], last["next_offset"], jump))


def only_vcpus(recs_file, tids_file):
    tids = {int(l.split()[1]) for l in open(tids_file) if l.strip()}
    kinds = ("vcpu_seen", "vcpu_run", "vcpu_stop", "vcpu_migrate", "vcpu_exit")
    others = {r["tid"] for r in load_records(recs_file) if r["type"] in kinds} - tids
    if others:
        fail("records for threads that are not vCPUs: %s" % sorted(others))
    n = sum(1 for r in load_records(recs_file) if r["type"] in kinds)
    print("# %d tracking records, all of vCPU threads" % n)


def pairing(dump_jsonl):
    """A file recorded with --guest: the guest's INFO, its CYC2NS snapshots
    with an exact kvm-clock conversion on every vCPU, and the host's own."""
    recs = load_records(dump_jsonl)
    if not any(r.get("section") == "guest_info" for r in recs):
        fail("no guest_info section")
    guest = [r for r in recs if r.get("from") == "guest" and r.get("type") == "cyc2ns"]
    host = [r for r in recs if r.get("from") == "host" and r.get("type") == "cyc2ns"]
    cpus = {r["cpu"] for r in guest}
    if len(cpus) < 2:
        fail("guest snapshots from CPUs %s, want both vCPUs" % sorted(cpus))
    pvclock_exact = 0x2 | 0x8    # HGCLOCK_CONV_EXACT | HGCLOCK_CONV_PVCLOCK
    bad = [r for r in guest if r["conv_flags"] & pvclock_exact != pvclock_exact]
    if bad:
        fail("guest conversion not exact kvm-clock: flags %d" % bad[0]["conv_flags"])
    if not host:
        fail("no host snapshots")
    print("# %d guest snapshots (exact kvm-clock), %d host snapshots" % (len(guest), len(host)))


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
