#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compare hgclock merge's text with trace-cmd report of its --dat files.

    tools/dat_compare.py MERGED.txt REPORT.txt HOST.dat

REPORT.txt is "trace-cmd report -t -i HOST.dat -i STEM-g0.dat ..." (or of
HOST.dat alone).  Both
must list the same events, each as (machine, CPU, time in ns, event name,
task, pid), in the same order; events of one time may come in either
order (each tool breaks ties its own way), so they are compared as sets
within one time.  A disruption mark ("hgclock  TIME: DISRUPTION ..." in
the text) must be in the host's file as a print event "hgclock:
DISRUPTION ..." of the same time and words.  Exit 0 when equal (and not
empty), 1 otherwise, with the first difference.
"""
import re
import sys

# "  FILE:  comm-pid  [cpu]  sec.ns: event:"   (trace-cmd report -t, -i twice or more;
# with one -i, no "FILE:": the host's file alone)
REPORT = re.compile(r'^\s*(?:(\S+\.dat):\s+)?(.*?)-(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(\S+):')
# "host  comm-pid [cpu] sec.ns: event ..."   "gG vV hHHH comm-pid [cpu] ..."
# (a buffer instance's event: "host  NAME: comm-pid ...", written into the
# machine's one buffer of the --dat file)
MERGED = re.compile(r'^(host|g(\d+) v\d+ h\S+)\s+(?:\S+: +)?(.*?)-(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(\S+)\s')
# "hgclock      sec.ns: DISRUPTION guest ..." (merge_out.c's marks)
MARK = re.compile(r'^hgclock\s+(\d+\.\d+): (DISRUPTION .*?)\s*$')
# trace-cmd report's print event: "... print: 0x0: hgclock: DISRUPTION ..." (or without the ip)
PRINTED = re.compile(r'\sprint:\s+(?:\S+:\s+)?hgclock: (DISRUPTION .*?)\s*$')


def by_time(rows):
    out, cur, ts = [], [], None
    for r in rows:
        if r[2] != ts and cur:
            out.append(sorted(cur))
            cur = []
        ts = r[2]
        cur.append(r)
    if cur:
        out.append(sorted(cur))
    return out


def main(merged, report, host):
    a, b = [], []
    with open(merged) as f:
        for line in f:
            k = MARK.match(line)
            if k:
                a.append(("host", 0, k.group(1), "print", "mark", k.group(2)))
                continue
            m = MERGED.match(line)
            if m:
                mach = "host" if m.group(1) == "host" else "g" + m.group(2)
                a.append((mach, int(m.group(5)), m.group(6), m.group(7),
                          m.group(3).strip(), m.group(4)))
    with open(report) as f:
        for line in f:
            m = REPORT.match(line)
            if not m:
                continue
            name = m.group(1) or host
            g = re.search(r'-(g\d+)\.dat$', name)
            mach = "host" if host.endswith(name) and not g else (g.group(1) if g else name)
            k = PRINTED.search(line)
            if k and mach == "host" and m.group(6) == "print":
                b.append(("host", int(m.group(4)), m.group(5), "print", "mark", k.group(1)))
                continue
            b.append((mach, int(m.group(4)), m.group(5), m.group(6),
                      m.group(3 - 1).strip(), m.group(3)))
    ga, gb = by_time(a), by_time(b)
    diff = next((i for i, (x, y) in enumerate(zip(ga, gb)) if x != y), None)
    if diff is None and len(ga) != len(gb):
        diff = min(len(ga), len(gb))
    print("%d merged events, %d in trace-cmd report" % (len(a), len(b)))
    if diff is not None:
        print("first difference at time group %d:" % diff)
        print("  merge:  %s" % (ga[diff] if diff < len(ga) else "(end)"))
        print("  report: %s" % (gb[diff] if diff < len(gb) else "(end)"))
        return 1
    return 0 if a else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
