# Guest side of the merge scenario (tools/vm/nested GUEST_SCRIPT): the
# hgclock agent and trace-cmd's agent serve the host; a light workload on
# each vCPU gives the guest's trace scheduler events all along.
echo "guest: kernel $(uname -r)"
# Each CPU's APIC ID as this kernel knows it: the merge checks' truth of
# which KVM vCPU (vcpu_id = APIC ID) ran which guest CPU.
awk -F': *' '/^processor/ { c = $2 } /^apicid/ { print "APICID " c " " $2 }' /proc/cpuinfo
events=${HGCLOCK_MERGE_GUEST_EVENTS:--e sched:sched_switch -e sched:sched_wakeup -e syscalls:sys_enter_clock_nanosleep -e syscalls:sys_exit_clock_nanosleep}
# Enable the traced events once, now (see merge-host.sh).
# shellcheck disable=SC2046
hold_events $(printf '%s\n' $events | grep -v '^-e$') || echo "guest: cannot hold the events"
insmod /hgclock.ko || exit 1
hgclock agent --once --duration 900 2>/tmp/agent.log &
agent=$!
trace-cmd agent >/tmp/tc-agent.log 2>&1 &
tcagent=$!
guest_sleepers 0.01
# Marker pairings (hgclock pairmark, Documentation/sync.rst) into the
# top-level trace_marker, which trace-cmd's agent records: the merge
# checks measure the marker method against kvm-exact on the same events.
# The pairings made while trace-cmd has the buffer off are skipped and
# counted.
hgclock pairmark --interval 200 >/tmp/pairmark.log 2>&1 &
pairmark=$!
# An application's own events (tools/examples/hgclock-events.c, through
# libhgclock's public clock) in perf's clock (the host's application uses
# the traces' local clock): the merge checks place them as they place the
# trace's events.  Slow (a slice a second per thread), as perf (5 Hz):
# their files go to the host on the console, a slow path under nested
# emulation.
app=
if [ -x /bin/hgclock-events ]; then
	hgclock-events -i 1000 /tmp/app.hgev 900 >/tmp/app.log 2>&1 &
	app=$!
fi
# perf's samples (cpu-clock, perf's own clock), decoded here where the
# guest's symbols are: merge --guest-perf maps each to its host CPU.
perf=
if command -v perf >/dev/null; then
	perf record -e cpu-clock -a -F 5 -o /tmp/perf.data >/tmp/perf.log 2>&1 &
	perf=$!
fi
echo "GUEST-WAITING"
host_wait DONE || exit 1
echo "guest: DONE received"
if [ -n "$perf" ]; then
	kill -INT $perf
	wait $perf
	perf script -i /tmp/perf.data -F comm,tid,cpu,time,event,ip,sym,dso --ns \
		>/tmp/perf.txt 2>>/tmp/perf.log
	echo "guest: perf exit $?, $(wc -l </tmp/perf.txt) samples; $(tail -n 1 /tmp/perf.log)"
	echo "PERF-SAMPLES-BEGIN"
	gzip -c /tmp/perf.txt | base64
	echo "PERF-SAMPLES-END"
fi
kill $agent $tcagent $pairmark 2>/dev/null
wait $agent
wait $pairmark
if [ -n "$app" ]; then
	kill -TERM $app
	wait $app
	echo "guest: app exit $? $(cat /tmp/app.log)"
	# gzip and base64 between two markers: merge-host.sh takes it off the console.
	echo "APP-EVENTS-BEGIN"
	gzip -c /tmp/app.hgev | base64
	echo "APP-EVENTS-END"
fi
sed 's/^/guest: agent: /' /tmp/agent.log | tail -n 3
sed 's/^/guest: pairmark: /' /tmp/pairmark.log | tail -n 3
echo "guest: done"
