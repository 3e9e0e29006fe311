#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check a Perfetto trace written by hgclock merge --perfetto.

    tools/pftrace_check.py PROTO FILE.pftrace [MERGED.txt]

Decodes FILE with protoc against PROTO (user/merge/perfetto_trace.proto, the
subset of Perfetto's schema that merge writes, Perfetto's field numbers)
and checks what merge.rst says of the file:

  - every packet is on its machine's sequence, with machine_id = guest + 1
    (none for the host), and its events are on tracks that machine
    described;
  - on each track, slices begin and end in pairs (SLICE_END closes the
    track's open slice), and on a CPU track (host or guest) no two vCPU
    runs are open at once;
  - every flow starts on a host CPU's run slice and ends, at the same
    instant, on the guest CPU's slice of that run; or (merge --analyze,
    category "hgclock.analyze") starts on a guest thread's preemption
    and ends, at the same instant, on an instant of the host;
  - every guest trace event whose vCPU the records place on a host CPU
    (a "host_cpu" >= 0 without "not-running"/"no-host-cpu") lies, both
    ends included, in a run slice of its guest and vCPU, on that host
    CPU's track, of that host thread, and in the guest CPU's slice of
    that run;
  - with MERGED.txt (merge's text of the same inputs, local or perf
    clock): the trace events are the same, each at the same ns, and
    the disruption marks (category "hgclock": a guest followed through
    a migration, a restore or a loss, merge.rst) as many as the text's
    DISRUPTION lines.

Prints a line of counts; exit 0 when all hold (and the file has events
and runs), 1 with the first failures otherwise.
"""
import bisect
import collections
import gc
import re
import checkrun
import sys

MERGED = re.compile(r'^(host|g(\d+) v(\d+) h\S+)\s+(.*?)-(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(\S+)\s')
VCPU_NAME = re.compile(r'^(?:CPU|vCPU) (\d+)$')


def parse(text):
    """protoc's text format into nested dicts of lists.  Written for speed
    (a merge of make demo's recording decodes to 19 million lines): one
    pass, no regular expression per line, and no cyclic garbage collector
    while it builds millions of containers (it scanned them again and
    again, more than half the time); they are frozen after it, out of
    the collector's way for the checks (gc.freeze())."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(text)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _parse(text):
    root = collections.defaultdict(list)
    stack = [root]
    top = root
    new = collections.defaultdict
    for line in text.split('\n'):
        line = line.strip()
        if not line:
            continue
        last = line[-1]
        if last == '}' and len(line) == 1:
            stack.pop()
            if not stack:
                raise ValueError('unbalanced braces in protoc output')
            top = stack[-1]
            continue
        if last == '{':
            d = new(list)
            top[line[:-1].rstrip()].append(d)
            stack.append(d)
            top = d
            continue
        key, _, val = line.partition(': ')
        if val[:1] == '"':
            val = bytes(val[1:-1], 'utf-8').decode('unicode_escape')
        elif val[:1] in DIGIT_START:
            try:
                val = int(val)          # protoc writes integers as -?[0-9]+
            except ValueError:
                pass                    # a float, an enum or a word: as it is
        top[key].append(val)
    if len(stack) != 1:
        raise ValueError('unbalanced braces in protoc output')
    return root


DIGIT_START = frozenset('-0123456789')


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


def args_of(ev):
    out = {}
    for a in ev.get('debug_annotations', []):
        for k in ('string_value', 'int_value', 'uint_value', 'bool_value'):
            if k in a:
                out[one(a, 'name')] = one(a, k)
    return out


def machine_of_uuid(uuid):
    return (uuid >> 40) - 2          # -1: the host, else the guest


def decode(proto, path):
    """FILE's packets, decoded by protoc against PROTO and parsed (parse()),
    or a string saying why not.  Also tools/pftrace_analyze_check.py's."""
    with open(path, 'rb') as f:
        run = checkrun.run(['protoc', '--decode=perfetto.protos.Trace',
                            '--proto_path=' + proto.rsplit('/', 1)[0], proto],
                           stdin=f, capture_output=True, text=True)
    if run.returncode:
        return 'protoc --decode failed: ' + run.stderr.strip()
    packets = parse(run.stdout).get('packet', [])
    err = resolve_interned(packets)
    return err if err else packets


SEQ_CLEARED, SEQ_NEEDS_STATE = 1, 2


def resolve_interned(packets):
    """Perfetto's interning undone in place, as its trace processor reads
    it: per sequence, in file order, a packet's interned_data defines iids
    for itself and the packets after it, until a packet with
    SEQ_INCREMENTAL_STATE_CLEARED starts the sequence afresh.  Each event's
    name_iid and category_iids and each argument's name_iid become the
    name, categories and name the checks read.  Returns None, or what
    breaks those rules (an iid never defined, a packet naming one without
    SEQ_NEEDS_INCREMENTAL_STATE, a sequence used before it was cleared)."""
    state = {}                      # sequence -> {kind: {iid: str}}
    kinds = (('event_names', 'name'), ('event_categories', 'name'),
             ('debug_annotation_names', 'name'))
    for i, p in enumerate(packets):
        seq = one(p, 'trusted_packet_sequence_id')
        flags = one(p, 'sequence_flags', 0)
        if flags & SEQ_CLEARED:
            state[seq] = {k: {} for k, _ in kinds}
        st = state.get(seq)
        idata = one(p, 'interned_data')
        if idata is not None:
            if st is None:
                return 'packet %d: interned data on sequence %s before it was cleared' % (i, seq)
            for k, field in kinds:
                for entry in idata.get(k, []):
                    st[k][one(entry, 'iid')] = one(entry, field)
        te = one(p, 'track_event')
        if te is None:
            continue
        used = 'name_iid' in te or 'category_iids' in te or \
            any('name_iid' in a for a in te.get('debug_annotations', []))
        if not used:
            continue
        if st is None or not flags & SEQ_NEEDS_STATE:
            return 'packet %d: names an interned string %s' % (
                i, 'before its sequence %s was cleared' % seq if st is None
                else 'without SEQ_NEEDS_INCREMENTAL_STATE')
        try:
            if 'name_iid' in te:
                te['name'] = [st['event_names'][one(te, 'name_iid')]]
            if 'category_iids' in te:
                te['categories'] = [st['event_categories'][c] for c in te['category_iids']]
            for a in te.get('debug_annotations', []):
                if 'name_iid' in a:
                    a['name'] = [st['debug_annotation_names'][one(a, 'name_iid')]]
        except KeyError as e:
            return 'packet %d: iid %s not defined on sequence %s' % (i, e, seq)
    return None


def main(proto, path, merged=None):
    errs = []

    def fail(msg):
        if len(errs) < 20:
            errs.append(msg)

    packets = decode(proto, path)
    if isinstance(packets, str):
        print(packets)
        return 1

    tracks = {}                       # uuid -> (machine, name, parent)
    events = []                       # (ts, seq, machine, event dict, args)
    for i, p in enumerate(packets):
        mid = one(p, 'machine_id')
        machine = -1 if mid is None else mid - 1
        if mid == 0:
            fail('packet %d: machine_id 0 (the host has none)' % i)
        if one(p, 'trusted_packet_sequence_id') != machine + 2:
            fail('packet %d: sequence %s for machine %d' %
                 (i, one(p, 'trusted_packet_sequence_id'), machine))
        td = one(p, 'track_descriptor')
        if td is not None:
            uuid = one(td, 'uuid')
            if uuid in tracks:
                fail('track %d described twice' % uuid)
            if machine_of_uuid(uuid) != machine:
                fail('track %d (%s) on machine %d' % (uuid, one(td, 'name'), machine))
            tracks[uuid] = (machine, one(td, 'name'), one(td, 'parent_uuid'))
        te = one(p, 'track_event')
        if te is not None:
            if one(p, 'timestamp') is None:
                fail('packet %d: an event without timestamp' % i)
                continue
            events.append((one(p, 'timestamp'), i, machine, te, args_of(te)))

    # CPU number of a CPU track: "CPU n"/"vCPU n" under a machine's root.
    cpu_track = {}
    for uuid, (machine, name, parent) in tracks.items():
        m = VCPU_NAME.match(name or '')
        if m and parent in tracks and tracks[parent][2] is None:
            cpu_track[(machine, int(m.group(1)))] = uuid

    # Slices per track, in Perfetto's order: by time, then file order.
    events.sort(key=lambda e: (e[0], e[1]))
    open_slices = collections.defaultdict(list)
    runs_host = collections.defaultdict(list)    # host cpu -> [(t0, t1, args)]
    runs_guest = collections.defaultdict(list)   # (guest, vcpu) -> [(t0, t1, args)]
    flows_start, flows_end = {}, {}
    trace_events = []
    nr_slices = 0
    nr_marks = 0
    for ts, i, machine, te, args in events:
        uuid = one(te, 'track_uuid')
        if uuid not in tracks:
            fail('packet %d: event on undescribed track %s' % (i, uuid))
            continue
        if tracks[uuid][0] != machine:
            fail('packet %d: machine %d event on machine %d track' % (i, machine, tracks[uuid][0]))
        typ = one(te, 'type')
        cat = one(te, 'categories')
        if typ == 'TYPE_SLICE_BEGIN':
            if cat == 'vcpu' and open_slices[uuid]:
                fail('packet %d: vCPU run opens at %d on %s with one open' % (i, ts, tracks[uuid][1]))
            open_slices[uuid].append((ts, te, args))
            for fid in te.get('flow_ids', []):
                if fid in flows_start:
                    fail('flow %d started twice' % fid)
                flows_start[fid] = (ts, machine, cat)
            for fid in te.get('terminating_flow_ids', []):
                if fid in flows_end:
                    fail('flow %d ended twice' % fid)
                flows_end[fid] = (ts, machine)
        elif typ == 'TYPE_SLICE_END':
            if not open_slices[uuid]:
                fail('packet %d: slice end on %s with none open' % (i, tracks[uuid][1]))
                continue
            t0, bte, bargs = open_slices[uuid].pop()
            nr_slices += 1
            nr_marks += one(bte, 'categories') == 'hgclock'
            if one(bte, 'categories') == 'vcpu':
                if machine < 0:
                    runs_host[bargs.get('host_cpu')].append((t0, ts, bargs))
                else:
                    runs_guest[(machine, bargs.get('vcpu'))].append((t0, ts, bargs))
        elif typ == 'TYPE_INSTANT':
            if cat == 'hgclock.analyze':
                # the host task that ran instead of a vCPU: a flow's end
                for fid in te.get('terminating_flow_ids', []):
                    if fid in flows_end:
                        fail('flow %d ended twice' % fid)
                    flows_end[fid] = (ts, machine)
            elif cat == 'hgclock':
                nr_marks += 1        # a disruption that never ended: an instant
            elif cat not in ('app', 'perf', 'vcpu'):
                trace_events.append((ts, machine, uuid, one(te, 'name'), args))
        else:
            fail('packet %d: event type %s' % (i, typ))
    for uuid, st in open_slices.items():
        if st and tracks[uuid][0] >= -1 and one(st[-1][1], 'categories') == 'vcpu':
            fail('a vCPU run left open on %s' % tracks[uuid][1])
    for fid, (ts, machine, cat) in flows_start.items():
        end = flows_end.get(fid)
        if end is None:
            fail('flow %d never ends' % fid)
        elif cat == 'hgclock.analyze':
            if machine < 0 or end[1] != -1 or end[0] != ts:
                fail('flow %d: a preemption of machine %d at %d to machine %d at %d' %
                     (fid, machine, ts, end[1], end[0]))
        elif machine != -1 or end[1] < 0 or end[0] != ts:
            fail('flow %d: from machine %d at %d to machine %d at %d' % (fid, machine, ts, end[1], end[0]))
    for fid in flows_end:
        if fid not in flows_start:
            fail('flow %d ends without start' % fid)

    # Every placed guest event within its run, on both sides.
    for k in runs_host:
        runs_host[k].sort(key=lambda r: r[0])
    for k in runs_guest:
        runs_guest[k].sort(key=lambda r: r[0])
    starts_host = {k: [r[0] for r in v] for k, v in runs_host.items()}
    starts_guest = {k: [r[0] for r in v] for k, v in runs_guest.items()}

    def within(runs, starts, ts, pred):
        # Runs of one track do not overlap: the last starting at or before ts, or ending at it.
        j = bisect.bisect_right(starts, ts) - 1
        for r in runs[max(j - 1, 0):j + 1]:
            if r[0] <= ts <= r[1] and pred(r[2]):
                return True
        return False

    nr_guest = nr_placed = 0
    for ts, machine, uuid, name, args in trace_events:
        if machine < 0:
            continue
        nr_guest += 1
        flags = str(args.get('flags', ''))
        hcpu = args.get('host_cpu', -1)
        if hcpu < 0 or 'not-running' in flags or 'no-host-cpu' in flags:
            continue
        m = VCPU_NAME.match(tracks[uuid][1] or '')
        vcpu = int(m.group(1)) if m else None
        tid = args.get('host_tid')
        nr_placed += 1
        if not within(runs_host.get(hcpu, []), starts_host.get(hcpu, []), ts,
                      lambda a: a.get('guest') == machine and a.get('vcpu') == vcpu and
                      a.get('host_tid') == tid):
            fail('g%d vCPU %s %s at %d: in no run of host thread %s on host CPU %d' %
                 (machine, vcpu, name, ts, tid, hcpu))
        if not within(runs_guest.get((machine, vcpu), []), starts_guest.get((machine, vcpu), []), ts,
                      lambda a: a.get('host_cpu') == hcpu):
            fail('g%d vCPU %s %s at %d: in no slice "on host CPU %d" of its track' %
                 (machine, vcpu, name, ts, hcpu))

    nr_compared = 0
    if merged:
        want = collections.Counter()
        nr_text_marks = 0
        with open(merged) as f:
            for line in f:
                nr_text_marks += line.startswith('hgclock ') and ': DISRUPTION ' in line
                m = MERGED.match(line)
                if not m or ':' in m.group(9):
                    continue         # app:/perf: lines, notices
                machine = -1 if m.group(1) == 'host' else int(m.group(2))
                want[(machine, int(m.group(7)) * 10**9 + int(m.group(8)), m.group(9))] += 1
        have = collections.Counter((machine, ts, name) for ts, machine, _, name, _ in trace_events)
        nr_compared = sum(want.values())
        for k in sorted((want - have).keys())[:5]:
            fail('in the text, not the trace: machine %d %s at %d' % (k[0], k[2], k[1]))
        for k in sorted((have - want).keys())[:5]:
            fail('in the trace, not the text: machine %d %s at %d' % (k[0], k[2], k[1]))
        if nr_text_marks != nr_marks:
            fail('%d disruption marks in the trace, %d DISRUPTION lines in the text' %
                 (nr_marks, nr_text_marks))

    nr_runs = sum(len(v) for v in runs_host.values())
    print('%d packets, %d tracks, %d trace events (%d guest, %d placed on host CPUs), '
          '%d slices, %d vCPU runs, %d flows, %d compared with the text' %
          (len(packets), len(tracks), len(trace_events), nr_guest, nr_placed, nr_slices,
           nr_runs, len(flows_start), nr_compared))
    if not trace_events:
        fail('no trace events')
    if not nr_runs:
        fail('no vCPU runs')
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == '__main__':
    if len(sys.argv) not in (3, 4):
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
