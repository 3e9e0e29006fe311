# Guest side of the vCPU tracking tests (tools/vm/nested GUEST_SCRIPT).
# Runs in the KVM guest from its initramfs; talks to the host through
# host_wait (ttyS1) and markers on the console.
echo "guest: kernel $(uname -r)"
insmod /hgclock.ko || exit 1
hgclock info | grep -E 'role|clocksource|conversion|exact'
# The agent serves one host session over vsock (port 7007).
hgclock agent --once --duration 600 2>/tmp/agent.log &
agent=$!
echo "GUEST-WAITING"

# write_tsc CPU DELTA: move CPU's TSC by DELTA counts (tsc_adjust: rdtsc
# and the IA32_TSC write back to back); KVM moves that vCPU's offset.
write_tsc() {
	local tsc

	tsc=$(/tsc_adjust "$1" "$2") || { echo "guest: TSC write failed"; return 1; }
	echo "guest: wrote TSC $tsc on CPU $1"
}

# marks FIRST: markers (hgclock mark) from each vCPU, as "MARK {json}".
marks() {
	for cpu in 0 1; do
		taskset -c $cpu hgclock mark --json --count 10 --interval 20 \
			--first $(($1 + 100 * cpu)) | sed 's/^/MARK /'
	done
}

host_wait WRITE-TSC || exit 1
write_tsc 0 400000 || exit 1
echo "TSC-WRITTEN"

# Pairing, while the host records with this agent: markers, a TSC write
# on vCPU 0 in the middle (a new segment), markers again.
host_wait MARKS-1 || exit 1
marks 0
echo "MARKS-1-DONE"
host_wait WRITE-TSC-2 || exit 1
write_tsc 0 600000 || exit 1
echo "TSC-2-WRITTEN"
host_wait MARKS-2 || exit 1
marks 1000
echo "MARKS-2-DONE"

host_wait DONE || exit 1
# The agent ended with the host's session; if not, stop it.
kill $agent 2>/dev/null
wait $agent
echo "guest: agent exit $?"
sed 's/^/guest: agent: /' /tmp/agent.log
rmmod hgclock || exit 1
echo "guest: done"
