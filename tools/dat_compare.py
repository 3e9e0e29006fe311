#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compare hgclock merge's text with trace-cmd report of its --dat files.

    tools/dat_compare.py MERGED.txt REPORT.txt HOST.dat

REPORT.txt is "trace-cmd report -t -i HOST.dat -i STEM-g0.dat ...".  Both
must list the same events, each as (machine, CPU, time in ns, event name,
task, pid), in the same order; events of one time may come in either
order (each tool breaks ties its own way), so they are compared as sets
within one time.  Exit 0 when equal (and not empty), 1 otherwise, with
the first difference.
"""
import re
import sys

# "  FILE:  comm-pid  [cpu]  sec.ns: event:"   (trace-cmd report -t, -i twice or more)
REPORT = re.compile(r'^\s*(\S+):\s+(.*?)-(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(\S+):')
# "host  comm-pid [cpu] sec.ns: event ..."   "gG vV hHHH comm-pid [cpu] ..."
MERGED = re.compile(r'^(host|g(\d+) v\d+ h\S+)\s+(.*?)-(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(\S+)\s')


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
            name = m.group(1)
            g = re.search(r'-(g\d+)\.dat$', name)
            mach = "host" if host.endswith(name) and not g else (g.group(1) if g else name)
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
