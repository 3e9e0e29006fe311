# SPDX-License-Identifier: GPL-2.0
"""Ground truth for host/guest clock checks, shared by the nested test
(selftests/nested/check_track.py sync) and the benchmark
(tools/bench/sync_report.py): the conversion formula of
struct hgclock_conversion, and KVM's own trace of a guest on the host's
TSC (x86-tsc trace clock): kvm_write_tsc_offset, and the CPUID exits of
hgclock mark (leaf 0x48434d4b, subleaf the marker's number)."""
import re

M64 = (1 << 64) - 1


def conv_apply(c, tsc):
    """struct hgclock_conversion's formula (uapi/linux/hgclock.h), on a
    dict with the field names hgclock dump --json prints."""
    d = (tsc - c["tsc_base"]) & M64
    d = (d << c["pre_shift"]) & M64 if c["pre_shift"] >= 0 else d >> -c["pre_shift"]
    return (c["offset_ns"] + ((d * c["mult"]) >> c["shift"])) & M64


def reaches(c, tsc, ns):
    """conv(tsc) >= ns, by signed difference: the formula is modular."""
    return ((conv_apply(c, tsc) - ns) & M64) < (1 << 63)


def conv_invert(c, ns):
    """Smallest TSC whose conversion reaches ns (binary search)."""
    lo, hi = c["tsc_base"], c["tsc_base"] + (1 << 46)
    if reaches(c, lo, ns):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reaches(c, mid, ns):
            hi = mid
        else:
            lo = mid
    return hi


def host_ns_fn(recs):
    """host TSC -> host sched_clock ns, with the host's CYC2NS snapshots of
    a dump (the last one taken at or before the TSC, else the first)."""
    hconv = sorted(((r["tsc"], i, r) for i, r in enumerate(recs)
                    if r.get("from") == "host" and r.get("type") == "cyc2ns"))
    if not hconv:
        return None

    def host_ns(tsc):
        best = hconv[0][2]
        for t, _, r in hconv:
            if t <= tsc:
                best = r
        return conv_apply(best, tsc)
    return host_ns


def load_debugfs_offsets(path):
    """'VCPU OFFSET' lines (debugfs tsc-offset, printed signed) -> {vcpu:
    offset modulo 2^64}; malformed lines (a guest gone) are skipped."""
    fields = [l.split() for l in open(path)]
    return {int(f[0]): int(f[1]) & M64 for f in fields if len(f) == 2}


def parse_kvm_trace(path):
    """(exits, offs, prevs): exits {marker: host TSC of its CPUID exit},
    offs {vcpu: [(host TSC, offset written)]} in trace order, prevs {vcpu:
    the offset before its first write}."""
    exits, offs, prevs = {}, {}, {}
    ev = re.compile(r"\s(\d+):\s+(kvm_cpuid|kvm_write_tsc_offset):\s+(.*)$")
    for line in open(path, errors="replace"):
        m = ev.search(line)
        if not m:
            continue
        ts, name, rest = int(m.group(1)), m.group(2), m.group(3)
        if name == "kvm_cpuid":
            v = re.search(r"func 48434d4b,? idx ([0-9a-f]+)", rest)
            if v:
                exits.setdefault(int(v.group(1), 16), ts)
        else:
            f = dict(kv.split("=") for kv in rest.split() if "=" in kv)
            vcpu = int(f["vcpu"])
            prevs.setdefault(vcpu, int(f["prev"]))
            offs.setdefault(vcpu, []).append((ts, int(f["next"])))
    return exits, offs, prevs


def host_tsc_before_exit(writes, gtsc, exit_ts):
    """The host TSC of a guest TSC reading taken before an exit at exit_ts:
    under the offset in force when the reading was taken, i.e. the one of
    writes [(host TSC, offset)] (sorted) written before the exit whose span
    (up to the next write, or the exit) holds the result.  KVM may re-base
    the vCPU between a reading and its exit (when the host preempts it
    there), and at a re-base it may move the offset back (the guest's TSC
    pauses while the vCPU is out): an offset written after the reading can
    then also put it after its own write, but not before the next one.
    None if no span holds it."""
    w = [x for x in writes if x[0] <= exit_ts]
    for i in range(len(w) - 1, -1, -1):
        ts, off = w[i]
        end = w[i + 1][0] if i + 1 < len(w) else exit_ts + 1
        h = (gtsc - off) & M64
        if ts <= h < end:
            return h
    return None
