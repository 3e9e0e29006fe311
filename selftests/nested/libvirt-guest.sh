# Guest side of the libvirt scenario (tools/vm/nested GUEST_SCRIPT, with
# selftests/nested/libvirt-host.sh): an agent that serves every host
# session (the host records once by CID and, where the tool can, once by
# domain name) until the host says DONE.
echo "guest: kernel $(uname -r)"
insmod /hgclock.ko || exit 1
hgclock agent --duration 900 2>/tmp/agent.log &
agent=$!
echo "GUEST-WAITING"
host_wait DONE || exit 1
kill $agent 2>/dev/null
wait $agent
echo "guest: agent exit $?"
sed 's/^/guest: agent: /' /tmp/agent.log
rmmod hgclock || exit 1
echo "guest: done"
