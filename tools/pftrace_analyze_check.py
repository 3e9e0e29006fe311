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
import re
import subprocess
import sys


def decode(proto, path):
    inc = proto.rsplit('/', 2)[0]
    out = subprocess.run(['protoc', '--decode=perfetto.protos.Trace', '--proto_path=' + inc, proto],
                         stdin=open(path, 'rb'), capture_output=True, check=True, text=True).stdout
    return out


def packets(text):
    """The decoded packets as dicts: the track event's and the track
    descriptor's fields by name, "args" the debug annotations' values."""
    cur = None
    blocks = []
    ann = None
    for line in text.splitlines():
        s = line.strip()
        if s == 'packet {' and not blocks:
            cur = {'flow_ids': [], 'term': [], 'args': {}, 'blocks': []}
            blocks = ['packet']
            continue
        if cur is None:
            continue
        if s.endswith('{'):
            name = s[:-1].strip()
            blocks.append(name)
            cur['blocks'].append(name)
            if name == 'debug_annotations':
                ann = {}
            continue
        if s == '}':
            if blocks and blocks[-1] == 'debug_annotations' and ann is not None:
                cur['args'][ann.get('name')] = ann.get('value')
                ann = None
            blocks.pop()
            if not blocks:
                yield cur
                cur = None
            continue
        m = re.match(r'(\w+): (.*)', s)
        if not m:
            continue
        k, v = m.group(1), m.group(2)
        v = v[1:-1] if v.startswith('"') else v
        if blocks[-1] == 'debug_annotations':
            if k == 'name':
                ann['name'] = v
            elif k.endswith('_value'):
                ann['value'] = v
        elif k == 'flow_ids':
            cur['flow_ids'].append(int(v))
        elif k == 'terminating_flow_ids':
            cur['term'].append(int(v))
        elif k not in cur:
            cur[k] = v


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
    for p in packets(decode(argv[1], argv[2])):
        if 'uuid' in p and 'track_descriptor' in p['blocks']:
            tracks[int(p['uuid'])] = p.get('name', '')
            if p.get('name', '').endswith(': ran instead of vCPUs'):
                host_tracks.add(int(p['uuid']))
            continue
        if 'track_uuid' not in p or 'timestamp' not in p:
            continue
        t = int(p['track_uuid'])
        if p.get('type') == 'TYPE_INSTANT' and p['term']:
            for f in p['term']:
                instants_by_flow[f] = t
        if p.get('type') == 'TYPE_INSTANT' and p.get('name', '').startswith('not drawn:'):
            not_drawn[t] += int(p['args'].get('wall_ns', 0))
        events[t].append((int(p['timestamp']), p.get('type'), p.get('name'), p['flow_ids']))
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
