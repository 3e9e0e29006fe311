# Guest side of the many-guests scenario (tools/vm/nested GUEST_SCRIPT):
# the main guest, with the module and the agent, sleeping and waking on
# each vCPU until the host is done (selftests/nested/many-host.sh).
echo "guest: kernel $(uname -r)"
insmod /hgclock.ko || exit 1
hgclock agent --duration 900 2>/tmp/agent.log &
agent=$!
guest_sleepers 0.01
echo "GUEST-WAITING"
host_wait DONE || exit 1
kill $agent 2>/dev/null
wait $agent
sed 's/^/guest: agent: /' /tmp/agent.log | tail -n 3
echo "guest: done"
