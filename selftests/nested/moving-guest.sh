# Guest side of the moving-offsets scenario (tools/vm/nested GUEST_SCRIPT,
# host VM booted with tsc=unstable): the hgclock agent serves the host
# (its exit pairings every 100 ms), and markers on both vCPUs give the
# checks their readings.  Talks to the host through host_wait (ttyS1) and
# markers on the console.
echo "guest: kernel $(uname -r)"
insmod /hgclock.ko || exit 1
hgclock info | grep -E 'clocksource|conversion|exact'
hgclock agent --once --duration 600 2>/tmp/agent.log &
agent=$!
# A light workload: the vCPUs sleep and wake, and KVM reloads them.
guest_sleepers 0.01
echo "GUEST-WAITING"
host_wait MARKS || exit 1
for round in 0 1 2 3; do
	for cpu in 0 1; do
		taskset -c $cpu hgclock mark --json --count 10 --interval 30 \
			--first $((round * 100 + cpu * 10)) | sed 's/^/MARK /'
	done
done
echo "MARKS-DONE"
# A second series while the host records this VM without its agent.
host_wait MARKS2 || exit 1
for round in 5 6; do
	for cpu in 0 1; do
		taskset -c $cpu hgclock mark --json --count 10 --interval 30 \
			--first $((round * 100 + cpu * 10)) | sed 's/^/MARK /'
	done
done
echo "MARKS2-DONE"
host_wait DONE || exit 1
kill $agent 2>/dev/null
wait $agent
sed 's/^/guest: agent: /' /tmp/agent.log | tail -n 3
rmmod hgclock || exit 1
echo "guest: done"
