# Guest side of the merge scenario (tools/vm/nested GUEST_SCRIPT): the
# hgclock agent and trace-cmd's agent serve the host; a light workload on
# each vCPU gives the guest's trace scheduler events all along.
echo "guest: kernel $(uname -r)"
# Each CPU's APIC ID as this kernel knows it: the merge checks' truth of
# which KVM vCPU (vcpu_id = APIC ID) ran which guest CPU.
awk -F': *' '/^processor/ { c = $2 } /^apicid/ { print "APICID " c " " $2 }' /proc/cpuinfo
events=${HGCLOCK_MERGE_GUEST_EVENTS:--e sched:sched_switch -e sched:sched_wakeup}
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
echo "GUEST-WAITING"
host_wait DONE || exit 1
kill $agent $tcagent $pairmark 2>/dev/null
wait $agent
wait $pairmark
sed 's/^/guest: agent: /' /tmp/agent.log | tail -n 3
sed 's/^/guest: pairmark: /' /tmp/pairmark.log | tail -n 3
echo "guest: done"
