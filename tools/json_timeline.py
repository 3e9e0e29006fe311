#!/usr/bin/env python3
"""Draws a window of hgclock merge's Chrome/Perfetto JSON as an SVG
timeline, the way a trace viewer lays it out: a lane per host CPU (its
events as ticks, the vCPU threads' runs as bars) and a lane per guest
vCPU (its events as ticks, each also marked on the host CPU lane that
ran it).  For pictures in the documentation, where ui.perfetto.dev
cannot be shown.

Usage: json_timeline.py MERGED.json OUT.svg [START_US [LENGTH_US]]
(default: the 5 ms with the most vCPU/host CPU pairs in guest events)."""
import decimal
import json
import sys

W, ML, LANE = 1000, 120, 26
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src) as f:
        d = json.load(f, parse_float=decimal.Decimal)
    evs = d["traceEvents"]
    guest = [e for e in evs if e.get("ph") == "i" and e["pid"] >= 100]
    length = decimal.Decimal(sys.argv[4]) if len(sys.argv) > 4 else decimal.Decimal(5000)
    if len(sys.argv) > 3:
        start = decimal.Decimal(sys.argv[3])
    else:
        # The window with the most (vCPU, host CPU) pairs, then events.
        ts = sorted((e["ts"], e["tid"], e["args"].get("host_cpu")) for e in guest)
        best, start, j = None, ts[0][0], 0
        for i in range(len(ts)):
            while ts[j][0] < ts[i][0] - length:
                j += 1
            w = ts[j:i + 1]
            score = (len({(v, h) for _, v, h in w}), len(w))
            if best is None or score > best:
                best, start = score, ts[j][0] - length / 20
    end = start + length
    host_cpus = sorted({e["tid"] for e in evs if e.get("pid") == 1 and e.get("ph") in "iX"})
    vcpus = sorted({e["tid"] for e in guest})
    lanes = [("host CPU %d" % c, 1, c) for c in host_cpus] + [("guest vCPU %d" % v, 100, v) for v in vcpus]
    y_of = {(p, t): 30 + i * LANE for i, (_, p, t) in enumerate(lanes)}

    def x(t):
        return ML + float((t - start) / length) * (W - ML - 20)

    o = ["<?xml version='1.0' encoding='UTF-8'?>",
         "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>"
         % (W, 30 + len(lanes) * LANE + 56),
         "<rect width='100%' height='100%' fill='white'/>",
         "<text x='%d' y='18' font-size='13' font-weight='bold'>hgclock merge --json, %s us from %.3f s (host local clock)</text>"
         % (ML, length, float(start) / 1e6)]
    for name, p, t in lanes:
        y = y_of[(p, t)]
        o.append("<rect x='%d' y='%d' width='%d' height='%d' fill='%s'/>" % (ML, y, W - ML - 20, LANE - 4,
                 "#f4f4f4" if p == 1 else "#eef4fb"))
        o.append("<text x='%d' y='%d' font-size='12' text-anchor='end'>%s</text>" % (ML - 6, y + 15, name))
    for e in evs:
        if e.get("ph") == "X" and e["pid"] == 1 and e["ts"] < end and e["ts"] + e["dur"] > start:
            x0, x1 = x(max(e["ts"], start)), x(min(e["ts"] + e["dur"], end))
            v = e["args"]["vcpu"]
            o.append("<rect x='%.1f' y='%d' width='%.1f' height='6' fill='%s' opacity='0.6'/>"
                     % (x0, y_of[(1, e["tid"])] + 15, max(x1 - x0, 0.5), COLORS[v % 4]))
    for e in evs:
        if e.get("ph") != "i" or not (start <= e["ts"] < end):
            continue
        xx = x(e["ts"])
        if e["pid"] == 1:
            o.append("<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#888'/>"
                     % (xx, y_of[(1, e["tid"])] + 2, xx, y_of[(1, e["tid"])] + 13))
        else:
            c = COLORS[e["tid"] % 4]
            y = y_of[(100, e["tid"])]
            o.append("<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='%s' stroke-width='2'/>"
                     % (xx, y + 1, xx, y + 21, c))
            h = e["args"].get("host_cpu", -1)
            if (1, h) in y_of:
                o.append("<circle cx='%.1f' cy='%d' r='3' fill='%s'/>" % (xx, y_of[(1, h)] + 8, c))
    yb = 30 + len(lanes) * LANE
    for k in range(6):
        t = start + length * k / 5
        o.append("<text x='%.1f' y='%d' font-size='11' text-anchor='middle'>+%d us</text>"
                 % (x(t), yb + 12, int(length * k / 5)))
    o.append("<text x='%d' y='%d' font-size='11'>grey ticks: host events (kvm_entry/kvm_exit); bars: "
             "the vCPU threads' runs on the host CPUs;</text>" % (ML, yb + 32))
    o.append("<text x='%d' y='%d' font-size='11'>coloured ticks: guest events on their vCPU; dots: "
             "the same events on the host CPU that ran the vCPU then</text>" % (ML, yb + 46))
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
