"""subprocess.run() for the check scripts, with a time limit that explains itself.

A check script that waits forever on a command it runs gives CI nothing
but its own time limit: make check's output stops, and nobody learns
which command hung or where.  run() is subprocess.run() with a limit
(HGCLOCK_CHECK_CMD_TIMEOUT_S, default 600 s: the commands here take
seconds natively, a few minutes for the largest trace-cmd report on a
loaded machine).  When a command outlives it, run() prints, as TAP
comments on standard output:

  - the command and how long it ran;
  - every thread's stack of each process in its tree (gdb, when
    installed; else the kernel's /proc/PID/task/*/stack and wchan);

then kills the tree and returns a CompletedProcess whose returncode is
TIMEOUT_RC and whose stderr says so, so the caller's check fails with a
reason rather than the script hanging.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

TIMEOUT_RC = 124        # timeout(1)'s status for a command it stopped


def limit_s():
    try:
        return max(1, int(os.environ.get("HGCLOCK_CHECK_CMD_TIMEOUT_S", "600")))
    except ValueError:
        return 600


def _children(pid):
    """PID's descendants, parents first (from /proc; the processes are ours)."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += sorted(kids.get(p, []))
    return out


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return "(%s)" % e.strerror


def _stacks(pid):
    """Lines describing where each thread of PID is."""
    lines = ["process %d: %s" % (pid, _read("/proc/%d/cmdline" % pid).replace("\0", " ").strip())]
    if shutil.which("gdb"):
        try:
            r = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt"],
                               capture_output=True, text=True, timeout=60)
            bt = [l for l in r.stdout.splitlines() if l.startswith(("Thread ", "#"))]
            if bt:
                return lines + bt[:400]
        except (subprocess.TimeoutExpired, OSError):
            pass
    try:
        tids = sorted(os.listdir("/proc/%d/task" % pid), key=int)
    except OSError:
        return lines + ["  (gone)"]
    for tid in tids:
        base = "/proc/%d/task/%s" % (pid, tid)
        lines.append("  thread %s (%s): wchan %s" % (tid, _read(base + "/comm"), _read(base + "/wchan")))
        lines += ["    " + l for l in _read(base + "/stack").splitlines()[:20]]
    return lines


def run(cmd, timeout=None, **kw):
    """subprocess.run(cmd, **kw) with a limit; see the top of the file."""
    limit = timeout if timeout is not None else limit_s()
    start = time.monotonic()
    data = kw.pop("input", None)
    if data is not None:
        kw["stdin"] = subprocess.PIPE
    if kw.pop("capture_output", False):
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    # Its own process group: the kill below reaches what it started.
    p = subprocess.Popen(cmd, start_new_session=True, **kw)
    try:
        out, err = p.communicate(input=data, timeout=limit)
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)
    except subprocess.TimeoutExpired:
        pass
    took = time.monotonic() - start
    print("# TIMEOUT: %s ran for %.0f s (limit %d s, HGCLOCK_CHECK_CMD_TIMEOUT_S); where it was:" %
          (" ".join(str(c) for c in cmd), took, limit))
    for pid in _children(p.pid):
        for line in _stacks(pid):
            print("#   " + line)
    sys.stdout.flush()
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    out, err = p.communicate()
    why = "timed out after %.0f s (stacks above)" % took
    if isinstance(err, bytes):
        err = (err or b"") + why.encode()
    elif err is not None or kw.get("text"):
        err = (err or "") + why
    return subprocess.CompletedProcess(cmd, TIMEOUT_RC, out, err)
