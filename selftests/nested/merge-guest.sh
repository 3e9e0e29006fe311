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
# The application, on the traces' local clock, into tmpfs (copied out at the end).
app=
if [ -x /bin/hgclock-events ]; then
	hgclock-events -l -i 100 /tmp/guest-app.hgev 900 >/tmp/app.log 2>&1 &
	app=$!
fi
echo "GUEST-WAITING"
host_wait DONE || exit 1
kill $agent $tcagent $pairmark 2>/dev/null
wait $agent
wait $pairmark
if [ -n "$app" ]; then
	echo "guest: stopping the app"
	kill -TERM "$app"
	wait "$app"
	echo "guest: app exit $? $(cat /tmp/app.log)"
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
		if timeout 60 cp /tmp/guest-app.hgev /out/guest-app.hgev &&
		   timeout 30 cmp /tmp/guest-app.hgev /out/guest-app.hgev; then
			echo "guest: app events out: $(wc -c </tmp/guest-app.hgev) bytes"
			timeout 30 umount /out
			break
		fi
		echo "guest: copying the app events out failed (try $try, status $?)"
		timeout 30 umount /out
	done
fi
sed 's/^/guest: agent: /' /tmp/agent.log | tail -n 3
sed 's/^/guest: pairmark: /' /tmp/pairmark.log | tail -n 3
echo "guest: done"
