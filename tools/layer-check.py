#!/usr/bin/env python3
"""tools/layer-check.py OBJ... - no circle of calls between user/ files.

Each object file's defined and undefined symbols (nm) give who uses whom:
a file uses another when it has an undefined symbol the other defines (a
call, or a reference to its data).  The files of user/ must form layers:
no file may use, through any chain, a file that uses it back.  An
include is not counted, a call is: the sync files share one internal
header, and their old circle showed in calls only.

Prints TAP (one line per check) and, for each circle, its files and the
symbols that close it; exit status 1 when there is a circle, 2 when an
object cannot be read.

    tools/layer-check.py build/user/*.o build/user/lib/*.o
"""
import os
import subprocess
import sys


def symbols(obj):
    """(defined, undefined) global symbol names of an object file."""
    r = subprocess.run(["nm", obj], capture_output=True, text=True)
    if r.returncode:
        raise OSError("nm %s: %s" % (obj, r.stderr.strip()))
    defined, undefined = set(), set()
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRCGSVW":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            undefined.add(f[1])
    return defined, undefined


def circles(graph):
    """Strongly connected components of more than one node (Tarjan,
    iterative: no recursion limit on a long chain)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    objs = sys.argv[1:]
    if not objs:
        print("usage: layer-check.py OBJ...", file=sys.stderr)
        return 2
    defs, uses = {}, {}
    try:
        for o in objs:
            defs[o], uses[o] = symbols(o)
    except OSError as e:
        print("layer-check: %s" % e, file=sys.stderr)
        return 2
    owner = {}
    for o in objs:
        for s in defs[o]:
            owner.setdefault(s, o)
    graph = {o: {owner[s] for s in uses[o] if s in owner and owner[s] != o} for o in objs}
    found = circles(graph)
    name = lambda o: os.path.relpath(o)
    edges = sum(len(v) for v in graph.values())
    if not found:
        print("ok 1 layers.no_circle # %d files, %d uses between them" % (len(objs), edges))
        return 0
    print("not ok 1 layers.no_circle # %d circle(s)" % len(found))
    for comp in found:
        print("# circle: " + " ".join(name(o) for o in comp))
        for a in comp:
            for b in comp:
                if b in graph[a]:
                    syms = sorted(s for s in uses[a] if owner.get(s) == b)
                    print("#   %s uses %s: %s" % (name(a), name(b), " ".join(syms[:8])))
    return 1


if __name__ == "__main__":
    sys.exit(main())
