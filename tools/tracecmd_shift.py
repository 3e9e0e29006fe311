# SPDX-License-Identifier: GPL-2.0
"""trace-cmd's own placement of a guest's events on the host's time (the
TimeShift option that trace-cmd record -A writes into the guest's file,
from its ptp probing), shared by tools/demo-show.py and
selftests/nested/check_merge.py, which compare it with hgclock's."""
import checkrun


def report_times(dat, raw):
    """{guest CPU: [event timestamps in ns, in report order]} of trace-cmd
    report -t on @dat: the raw guest clock (@raw), or shifted to the
    host's time by the file's TimeShift.  Lines without a CPU and a
    timestamp are passed over."""
    r = checkrun.run(["trace-cmd", "report", "-t"] + (["--raw-ts"] if raw else []) +
                     ["-i", dat], capture_output=True, text=True)
    per_cpu = {}
    for line in r.stdout.splitlines():
        try:
            cpu = int(line.split("[", 1)[1].split("]", 1)[0])
            t = line.split("]", 1)[1].split(":", 1)[0].strip()
            if "." in t:
                sec, frac = t.split(".")
                v = int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])
            else:
                v = int(t)
        except (IndexError, ValueError):
            continue
        per_cpu.setdefault(cpu, []).append(v)
    return per_cpu


def shifted_times(dat):
    """[(guest CPU, raw guest ts, trace-cmd's host-time placement), ...]
    in ns, one per event of @dat, from two trace-cmd report runs of it:
    raw, and shifted by its TimeShift option.  A CPU whose two runs do not
    list as many events is left out."""
    raw, shifted = report_times(dat, True), report_times(dat, False)
    out = []
    for cpu, raws in raw.items():
        sh = shifted.get(cpu, [])
        if len(sh) == len(raws):
            out.extend((cpu, g, t) for g, t in zip(raws, sh))
    return out


def has_timeshift(dat):
    """Does @dat carry a TimeShift option (trace-cmd record -A writes one
    once its time sync with the guest is done)?  None when trace-cmd
    dump cannot say.  Without one, trace-cmd report shows the guest's
    own clock: the events are not on the host's time at all (a guest that
    died, or a sync that never finished)."""
    r = checkrun.run(["trace-cmd", "dump", "--options", "-i", dat], capture_output=True, text=True)
    if r.returncode:
        return None
    return "[Option TimeShift" in r.stdout
