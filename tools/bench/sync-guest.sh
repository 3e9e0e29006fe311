# Guest side of tools/bench/sync.sh (tools/vm/nested GUEST_SCRIPT): the
# hgclock agent and trace-cmd's agent serve the host; a light workload
# gives trace-cmd's guest trace events to convert.
echo "guest: kernel $(uname -r)"
insmod /hgclock.ko || exit 1
hgclock agent --once --duration 900 2>/tmp/agent.log &
agent=$!
trace-cmd agent >/tmp/tc-agent.log 2>&1 &
tcagent=$!
# Wake-ups on both vCPUs: sched_switch events all along.
for cpu in 0 1; do
	taskset -c $cpu sh -c 'while :; do sleep 0.02; done' &
done
echo "GUEST-WAITING"
host_wait DONE || exit 1
kill $agent $tcagent 2>/dev/null
wait $agent
sed 's/^/guest: agent: /' /tmp/agent.log
sed 's/^/guest: trace-cmd agent: /' /tmp/tc-agent.log | tail -n 5
echo "guest: done"
