# Guest side of tools/bench/sync.sh (tools/vm/nested GUEST_SCRIPT): the
# hgclock agent and trace-cmd's agent serve the host; a light workload
# gives trace-cmd's guest trace events to convert.
echo "guest: kernel $(uname -r)"
# Enable the traced event once, now (hold_events, in the guest's init):
# enabling a tracepoint patches kernel text, which the emulated nested
# guest does not always survive; trace-cmd's own enabling later then
# patches nothing.
hold_events sched:sched_switch || echo "guest: cannot hold the events"
insmod /hgclock.ko || exit 1
hgclock agent --once --duration 900 2>/tmp/agent.log &
agent=$!
trace-cmd agent --notimeout --verbose=info >/tmp/tc-agent.log 2>&1 &
tcagent=$!
# Wake-ups on both vCPUs: sched_switch events all along.
guest_sleepers 0.02
# Markers all along (hgclock mark: readings, each followed by a CPUID exit
# the host traces): ground truth for x86-tsc even while KVM moves the
# offsets, anchored at each marker's exit.
(
	seq=0
	while [ ! -e /tmp/stop-marks ]; do
		for cpu in 0 1; do
			taskset -c $cpu hgclock mark --json --count 5 --interval 50 --first $seq |
				sed 's/^/MARK /'
			seq=$(((seq + 5) % 60000))
		done
		sleep 0.2
	done
) &
marker=$!
echo "GUEST-WAITING"
host_wait DONE || exit 1
touch /tmp/stop-marks
wait $marker
kill $agent $tcagent 2>/dev/null
wait $agent
sed 's/^/guest: agent: /' /tmp/agent.log
sed 's/^/guest: trace-cmd agent: /' /tmp/tc-agent.log | tail -n 5
echo "guest: done"
