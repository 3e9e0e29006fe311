# Guest side of the merge scenario (tools/vm/nested GUEST_SCRIPT): the
# hgclock agent and trace-cmd's agent serve the host; a light workload on
# each vCPU gives the guest's trace scheduler events all along; an
# application (tools/examples/hgclock-events, when the host gave it as
# /bin/hgclock-events) stamps its events with libhgclock around
# nanosleep, whose system calls the guest's trace records.  Its event
# file leaves through the "guestout" 9p share (tools/vm/nested-host).
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
# --verbose=info: trace-cmd logs only critical messages by default, so
# an agent that failed said nothing (an empty log, three times in the
# week of 2026-12-07).  --notimeout: the host's trace-cmd waits for us
# with no time limit (merge-host.sh says why), and so do we for it.
trace-cmd agent --notimeout --verbose=info >/tmp/tc-agent.log 2>&1 &
tcagent=$!
guest_sleepers 0.01
# Marker pairings (hgclock pairmark, Documentation/sync.rst) into the
# top-level trace_marker, which trace-cmd's agent records: the merge
# checks measure the marker method against kvm-exact on the same events.
# The pairings made while trace-cmd has the buffer off are skipped and
# counted.
hgclock pairmark --interval 200 >/tmp/pairmark.log 2>&1 &
pairmark=$!
# perf (when the host gave /bin/perf): perf record of the whole guest,
# cpu-clock (the emulated CPU has no PMU), into tmpfs.  The guest's init
# holds perf's static key since boot (tools/vm/guest-init), so this start
# patches no kernel text.
gperf=
if [ -x /bin/perf ]; then
	perf record -e cpu-clock -a -F 10 -o /tmp/guest-perf.data >/tmp/perf.log 2>&1 &
	gperf=$!
fi
# The application, on the traces' local clock, into tmpfs (copied out at the end).
app=
if [ -x /bin/hgclock-events ]; then
	hgclock-events -l -i 100 /tmp/guest-app.hgev 900 >/tmp/app.log 2>&1 &
	app=$!
fi
echo "GUEST-WAITING"
# Until DONE, the host may run the analysis's ground-truth phase
# (merge-host.sh's hog_phase): HOG-START, a second hgclock agent for a
# second recording; HOG-BUSY, a thread spinning on vCPU 0 that reads its
# CPU's steal (/proc/stat, in USER_HZ) as it starts and as it stops, all
# in shell builtins (no other thread in between), and right after each
# reading writes it to trace_marker, so that the recording says when
# (check_hog.py splits that window); HOG-STOP, it stops.
agent2= busy=
while read -r line </dev/ttyS1; do
	case $line in
	HOG-START)
		hgclock agent --once --duration 300 2>/tmp/agent-hog.log &
		agent2=$!
		echo "HOG-AGENT-UP" ;;
	HOG-BUSY)
		rm -f /tmp/hog-stop
		taskset -c 0 sh -c 'm=/sys/kernel/tracing/trace_marker
			[ -w $m ] || m=/sys/kernel/debug/tracing/trace_marker
			{ read -r l; read -r c u n s i w q sq st r; } </proc/stat
			echo "hgclock-hog steal-before $c $st" 2>/dev/null >$m
			echo "HOG-STEAL-BEFORE $c $st $$"
			while [ ! -e /tmp/hog-stop ]; do :; done
			{ read -r l; read -r c u n s i w q sq st r; } </proc/stat
			echo "hgclock-hog steal-after $c $st" 2>/dev/null >$m
			echo "HOG-STEAL-AFTER $c $st $$"' &
		busy=$! ;;
	HOG-STOP)
		touch /tmp/hog-stop
		[ -z "$busy" ] || wait $busy
		busy=
		echo "HOG-BUSY-DONE" ;;
	DONE) break ;;
	esac
done
[ "$line" = DONE ] || exit 1
touch /tmp/hog-stop
kill $agent $tcagent $pairmark $agent2 2>/dev/null
wait $agent
wait $pairmark
outs=
if [ -n "$gperf" ]; then
	kill -INT "$gperf"
	wait "$gperf"
	echo "guest: perf record exit $? $(tail -n 2 /tmp/perf.log | tr '\n' ' ')"
	# Its text, here where its symbols are (Documentation/perf-apps.rst).
	perf script -i /tmp/guest-perf.data -F comm,tid,cpu,time,event,ip,sym,dso --ns \
		>/tmp/guest-perf.txt 2>/tmp/perf-script.log ||
		echo "guest: perf script failed: $(tail -n 2 /tmp/perf-script.log | tr '\n' ' ')"
	echo "guest: perf samples: $(wc -l </tmp/guest-perf.txt) lines"
	outs="guest-perf.txt"
fi
if [ -n "$app" ]; then
	echo "guest: stopping the app"
	kill -TERM "$app"
	wait "$app"
	echo "guest: app exit $? $(cat /tmp/app.log)"
	outs="$outs guest-app.hgev"
fi
if [ -n "$outs" ]; then
	mkdir -p /out
	# Up to three tries: under nested emulation a 9p request now and
	# then takes longer than a timeout (CI 2026-12-03 lost the file once,
	# cause not kept).  Each failure is said, with its status.
	for try in 1 2 3; do
		if ! timeout 30 mount -t 9p -o trans=virtio,version=9p2000.L guestout /out; then
			echo "guest: cannot mount the guestout share (try $try, status $?)"
			continue
		fi
		echo "guest: guestout mounted"
		ok=1
		for f in $outs; do
			if timeout 60 cp "/tmp/$f" "/out/$f" && timeout 30 cmp "/tmp/$f" "/out/$f"; then
				echo "guest: out: $f $(wc -c <"/tmp/$f") bytes"
			else
				echo "guest: copying $f out failed (try $try, status $?)"
				ok=0
			fi
		done
		timeout 30 umount /out
		[ $ok = 1 ] && break
	done
fi
sed 's/^/guest: agent: /' /tmp/agent.log | tail -n 3
# trace-cmd's agent: what it said when the host's trace-cmd record
# failed (make demo, 2026-12-07: "cannot create output handle", exit
# 22, on an empty host-guest.dat: the agent had sent nothing).
sed 's/^/guest: tc-agent: /' /tmp/tc-agent.log | tail -n 12
if kill -0 "$tcagent" 2>/dev/null; then
	echo "guest: tc-agent: still running"
else
	wait "$tcagent"
	echo "guest: tc-agent: exited, status $?"
fi
# A trace-cmd that died of a signal leaves its line in the kernel's log.
dmesg | grep -E 'trace-cmd|segfault|Out of memory' | tail -n 3 | sed 's/^/guest: tc-agent: dmesg: /'
sed 's/^/guest: pairmark: /' /tmp/pairmark.log | tail -n 3
echo "guest: done"
