#!/usr/bin/env python3
# tools/pftrace_analyze_check.py - checks the guest threads' tracks that
# merge --perfetto writes with --analyze (Documentation/analyze.rst, "In
# Perfetto") against the same run's --analyze-json report:
#
#   tools/pftrace_analyze_check.py PROTO TRACE.pftrace REPORT.json
#
# PROTO is user/merge/perfetto_trace.proto; protoc decodes the trace.
# For every guest thread of the report:
#   - its track's slices ("on vCPU N") do not overlap, and their walls
#     with those of the slices not drawn (an instant "not drawn: ..."
#     with the wall it leaves out: a lost switch) add up to the report's
#     wall_ns + uncertain_ns;
#   - every piece (exit, preemption, host sleep, disruption) lies inside
#     one of them, and their ns add up, by component and by exit reason,
#     to the report's split exactly (at most, for a thread with slices
#     not drawn);
#   - every preemption has a flow to an instant on a host task's track.
# Prints one summary line; exit status 0 when all hold, 1 otherwise.
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pftrace_check import args_of, decode, one  # noqa: E402


def main(argv):
    if len(argv) != 4:
        print('usage: pftrace_analyze_check.py PROTO TRACE REPORT.json', file=sys.stderr)
        return 2
    report = json.load(open(argv[3]))
    tracks = {}          # uuid -> name (descriptors)
    host_tracks = set()
    events = collections.defaultdict(list)   # track -> [(ts, type, name, flows)]
    instants_by_flow = {}
    not_drawn = collections.Counter()     # track -> wall ns of slices not drawn
    packets = decode(argv[1], argv[2])
    if isinstance(packets, str):
        print(packets)
        return 1
    for p in packets:
        td = one(p, 'track_descriptor')
        if td is not None:
            name = one(td, 'name') or ''
            tracks[one(td, 'uuid')] = name
            if name.endswith(': ran instead of vCPUs'):
                host_tracks.add(one(td, 'uuid'))
            continue
        te = one(p, 'track_event')
        if te is None or one(p, 'timestamp') is None:
            continue
        t = one(te, 'track_uuid')
        typ, name = one(te, 'type'), one(te, 'name')
        if typ == 'TYPE_INSTANT':
            for f in te.get('terminating_flow_ids', []):
                instants_by_flow[f] = t
            if (name or '').startswith('not drawn:'):
                not_drawn[t] += int(args_of(te).get('wall_ns', 0))
        events[t].append((one(p, 'timestamp'), typ, name, te.get('flow_ids', [])))
    bad = []
    by_tid = {}
    for uuid, name in tracks.items():
        m = re.match(r'(.*) (\d+): on the host$', name)
        if m:
            by_tid[(uuid >> 40) - 2, int(m.group(2))] = uuid
    comp_of = {'exit': 'exits', 'preempted': 'preempted', 'vCPU': 'host_blocked',
               'disrupted': 'disrupted'}
    nr_pieces = nr_flows = 0
    for t in report['threads']:
        if t['tid'] <= 0:
            continue
        uuid = by_tid.get((t['guest'], t['tid']))
        if uuid is None:
            if t['wall_ns'] + t['uncertain_ns']:
                bad.append('thread %d: no track' % t['tid'])
            continue
        # slices: a stack per track (parents, then pieces inside)
        parents, pieces, stack = [], [], []
        # file order within one timestamp is the writer's (begin before
        # its children, children's ends before the parent's)
        for ts, typ, name, flows in events[uuid]:
            if typ == 'TYPE_SLICE_BEGIN':
                stack.append((ts, name, flows))
            elif typ == 'TYPE_SLICE_END':
                if not stack:
                    bad.append('thread %d: an end without a begin' % t['tid'])
                    break
                b = stack.pop()
                (pieces if stack else parents).append((b[0], ts, b[1], b[2]))
        if stack:
            bad.append('thread %d: %d slices never ended' % (t['tid'], len(stack)))
        parents.sort()
        for a, b in zip(parents, parents[1:]):
            if b[0] < a[1]:
                bad.append('thread %d: slices overlap at %d' % (t['tid'], b[0]))
        wall = sum(e - s for s, e, _, _ in parents)
        left_out = not_drawn[uuid]
        if wall + left_out != t['wall_ns'] + t['uncertain_ns']:
            bad.append('thread %d: slices %d ns (+ %d not drawn), report %d + %d uncertain' %
                       (t['tid'], wall, left_out, t['wall_ns'], t['uncertain_ns']))
        got = collections.Counter()
        reasons = collections.Counter()
        for s, e, name, flows in pieces:
            nr_pieces += 1
            comp = comp_of.get(name.split(' ')[0])
            if comp is None:
                bad.append('thread %d: piece %r' % (t['tid'], name))
                continue
            got[comp] += e - s
            if comp == 'exits':
                reasons[name[len('exit '):]] += e - s
            if comp == 'preempted':
                if not flows or instants_by_flow.get(flows[0]) not in host_tracks:
                    bad.append('thread %d: preemption at %d without its flow to a host task' %
                               (t['tid'], s))
                nr_flows += 1
            if not any(ps <= s and e <= pe for ps, pe, _, _ in parents):
                bad.append('thread %d: piece at %d outside its slices' % (t['tid'], s))
        def off(drawn, want):
            return drawn > want if left_out else drawn != want
        for comp in ('exits', 'preempted', 'host_blocked', 'disrupted'):
            if off(got[comp], t['split'][comp]):
                bad.append('thread %d: %s %d ns drawn, %d in the report' %
                           (t['tid'], comp, got[comp], t['split'][comp]))
        want = {e['reason']: e['ns'] for e in t['split']['exit_reasons']}
        for k in set(want) | set(reasons):
            if off(reasons[k], want.get(k, 0)):
                bad.append('thread %d: exit %s %d ns drawn, %d in the report' %
                           (t['tid'], k, reasons[k], want.get(k, 0)))
    print('%d thread tracks, %d pieces, %d preemption flows; %s' %
          (len(by_tid), nr_pieces, nr_flows, '; '.join(bad[:5]) if bad else 'all hold'))
    return 1 if bad or not by_tid else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
