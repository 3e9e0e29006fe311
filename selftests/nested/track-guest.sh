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

host_wait WRITE-TSC || exit 1
# IA32_TSC (MSR 0x10) from vCPU 0: KVM moves the vCPU's TSC offset.  Read
# it, add about a millisecond (a large jump upsets the guest's clocks),
# write it back: 8 bytes little endian; dd counts in 8-byte blocks.
tsc=$(dd if=/dev/cpu/0/msr bs=8 count=1 skip=2 2>/dev/null | od -An -tu8 | tr -d ' ')
[ -n "$tsc" ] || { echo "guest: cannot read the TSC MSR"; exit 1; }
tsc=$((tsc + 2000000))
bytes=""
i=0
while [ $i -lt 8 ]; do
	bytes="$bytes\\$(printf %03o $(( (tsc >> (8 * i)) & 255 )))"
	i=$((i + 1))
done
printf "$bytes" | dd of=/dev/cpu/0/msr bs=8 count=1 seek=2 2>/dev/null ||
	{ echo "guest: TSC write failed"; exit 1; }
echo "guest: wrote TSC $tsc"
echo "TSC-WRITTEN"

host_wait DONE || exit 1
# The agent ended with the host's session; if not, stop it.
kill $agent 2>/dev/null
wait $agent
echo "guest: agent exit $?"
sed 's/^/guest: agent: /' /tmp/agent.log
rmmod hgclock || exit 1
echo "guest: done"
