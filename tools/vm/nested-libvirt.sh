# tools/vm/nested-libvirt.sh - the nested guest started through libvirt.
# shellcheck shell=bash
#
# Sourced by tools/vm/nested-host.  With HGCLOCK_GUEST_LIBVIRT=1 its
# guest_start runs the same guest (kernel, initramfs, command line, 2 vCPUs,
# memory, vhost-vsock CID 3, the read-only 9p share of / as "hostroot", the
# console on ttyS0 into HGCLOCK_GUEST_CONSOLE, the control pipe
# /tmp/guestctl on ttyS1) as a transient libvirt domain instead of a
# hand-written qemu command line, so that what hgclock finds on the host
# (qemu's command line, its pid file, its threads) is what libvirt writes.
#
# The daemon is Debian's monolithic libvirtd (libvirt-daemon,
# libvirt-daemon-driver-qemu; no libvirt-daemon-system, so no users, no
# services and none of its directories on the read-only root), started by
# hand, without dbus or systemd, listening on its local unix sockets only.
# It runs in a mount namespace of its own, where its configuration
# directory, /etc/passwd and /etc/group (with the user libvirt-qemu) and
# /var/lib, /var/cache and /var/log are bind mounts of files and
# directories under $LV_DIR (tmpfs /run): everything it writes is visible
# from outside under $LV_DIR, and the rest of the host VM keeps seeing the
# unchanged root.  /run/libvirt is on /run itself, so its sockets and the
# domain's pid file (/run/libvirt/qemu/NAME.pid) are where a real host has
# them.  qemu runs as root with no security driver, no cgroups (the host VM
# mounts none) and no private /dev.

LV_DIR=/run/hgclock-libvirt
LV_DOMAIN=guest
LV_URI=qemu:///system

# lv_xml_escape TEXT: TEXT for an XML attribute or element.
lv_xml_escape() {
	local s=$1

	s=${s//&/&amp;}
	s=${s//</&lt;}
	s=${s//>/&gt;}
	s=${s//\'/&apos;}
	s=${s//\"/&quot;}
	printf '%s' "$s"
}

# lv_vcpus_xml, lv_topology_xml: the domain's vCPUs.  With
# HGCLOCK_GUEST_APIC_GAP=1 (tools/vm/nested-host), the same gapped pair
# as by hand: 6 possible vCPUs in 2 sockets of 3 cores, vCPUs 0 and 3
# (socket 1 core 0, APIC ID 4) present; libvirt adds vCPU 3 as a
# -device, the way it starts hot-pluggable vCPUs.
lv_vcpus_xml() {
	if [ "${HGCLOCK_GUEST_APIC_GAP:-0}" = 1 ]; then
		cat <<EOF
  <vcpu placement='static' current='2'>6</vcpu>
  <vcpus>
    <vcpu id='0' enabled='yes' hotpluggable='no' order='1'/>
    <vcpu id='1' enabled='no' hotpluggable='yes'/>
    <vcpu id='2' enabled='no' hotpluggable='yes'/>
    <vcpu id='3' enabled='yes' hotpluggable='yes' order='2'/>
    <vcpu id='4' enabled='no' hotpluggable='yes'/>
    <vcpu id='5' enabled='no' hotpluggable='yes'/>
  </vcpus>
EOF
	else
		echo "  <vcpu placement='static'>${VM_SMP:-2}</vcpu>"
	fi
}

lv_topology_xml() {
	[ "${HGCLOCK_GUEST_APIC_GAP:-0}" = 1 ] &&
		printf "<topology sockets='2' dies='1' cores='3' threads='1'/>"
}

# lv_domain_xml: the domain, from the VM_* variables vm_qemu_cmd reads
# (VM_IMAGE, VM_INITRD, VM_CONSOLE, VM_SMP, VM_MEM, VM_APPEND) and the
# control pipe /tmp/guestctl(.in,.out).
lv_domain_xml() {
	cat <<EOF
<domain type='kvm'>
  <name>$LV_DOMAIN</name>
  <memory unit='MiB'>${VM_MEM:-512}</memory>
$(lv_vcpus_xml)
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$(lv_xml_escape "$VM_IMAGE")</kernel>
    <initrd>$(lv_xml_escape "$VM_INITRD")</initrd>
    <cmdline>$(lv_xml_escape "console=ttyS0 quiet panic=-1 ${VM_APPEND:-}")</cmdline>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu mode='host-passthrough' check='none'>$(lv_topology_xml)</cpu>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='$(lv_xml_escape "$VM_CONSOLE")' append='on'/>
      <target type='isa-serial' port='0'/>
    </serial>
    <serial type='pipe'>
      <source path='/tmp/guestctl'/>
      <target type='isa-serial' port='1'/>
    </serial>
    <filesystem type='mount' accessmode='squash' multidevs='remap'>
      <driver type='path'/>
      <source dir='/'/>
      <target dir='hostroot'/>
      <readonly/>
    </filesystem>
    <filesystem type='mount' accessmode='squash' multidevs='remap'>
      <driver type='path'/>
      <source dir='/tmp/guest-out'/>
      <target dir='guestout'/>
    </filesystem>
    <vsock model='virtio'>
      <cid auto='no' address='3'/>
    </vsock>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}

# lv_config: libvirtd's and the qemu driver's configuration, in
# $LV_DIR/etc (the root's /etc/libvirt plus these two files).
lv_config() {
	mkdir -p "$LV_DIR"/etc "$LV_DIR"/var-lib "$LV_DIR"/var-cache "$LV_DIR"/var-log || return 1
	cp -a /etc/libvirt/. "$LV_DIR"/etc/ || return 1
	# The qemu driver resolves its built-in user and group (Debian's
	# libvirt-qemu, made by libvirt-daemon-system) before it reads
	# qemu.conf: the daemon's /etc/passwd and /etc/group have them.
	{ cat /etc/passwd; getent passwd libvirt-qemu >/dev/null ||
		echo "libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin"; } \
		>"$LV_DIR"/passwd || return 1
	{ cat /etc/group; getent group libvirt-qemu >/dev/null || echo "libvirt-qemu:x:64055:"; } \
		>"$LV_DIR"/group || return 1
	# Root only, on the unix sockets: no polkit (no dbus here).
	cat >"$LV_DIR"/etc/libvirtd.conf <<EOF || return 1
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_filters = "${HGCLOCK_LIBVIRT_LOG_FILTERS:-}"
log_outputs = "${HGCLOCK_LIBVIRT_LOG_LEVEL:-3}:file:$LV_DIR/libvirtd.log"
EOF
	# qemu as root, nothing relabelled or confined; its stdout and stderr
	# straight into /var/log/libvirt/qemu/NAME.log (no virtlogd).
	cat >"$LV_DIR"/etc/qemu.conf <<EOF || return 1
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
EOF
}

# lv_daemon_start: libvirtd in its own mount namespace; waits until virsh
# reaches it.  Sets LV_DAEMON_PID.
lv_daemon_start() {
	local i=0

	if ! command -v libvirtd >/dev/null || ! command -v virsh >/dev/null; then
		echo "nested-host: libvirtd or virsh missing (tools/deps.sh)"
		return 1
	fi
	rm -rf "$LV_DIR" /run/libvirt
	lv_config || { echo "nested-host: cannot write libvirt's configuration in $LV_DIR"; return 1; }
	# Probing qemu's capabilities (4 runs of qemu: both binaries, with
	# KVM and with TCG) took 50 s in the emulated host VM: keep libvirt's
	# cache of them in the build tree, one per kernel (libvirt checks
	# every entry against the binaries, the kernel and the CPU, and
	# probes again when one changed).  HGCLOCK_LIBVIRT_CACHE= (empty) for
	# none.
	local cache=${HGCLOCK_LIBVIRT_CACHE-$PWD/build/vm-cache/libvirt-$(uname -r)}
	if [ -n "$cache" ] && ! mkdir -p "$cache"; then
		echo "nested-host: cannot create $cache; libvirt probes qemu again"
		cache=
	fi
	mkdir -p "$LV_DIR"/var-cache/libvirt/qemu/capabilities
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare --mount --propagation private -- /bin/sh -c '
		d=$1
		mount --bind "$d/etc" /etc/libvirt &&
		mount --bind "$d/passwd" /etc/passwd &&
		mount --bind "$d/group" /etc/group &&
		mount --bind "$d/var-lib" /var/lib &&
		mount --bind "$d/var-cache" /var/cache &&
		mount --bind "$d/var-log" /var/log || exit 1
		if [ -n "$2" ]; then
			mount --bind "$2" /var/cache/libvirt/qemu/capabilities || exit 1
		fi
		exec libvirtd --config "$d/etc/libvirtd.conf"' lv "$LV_DIR" "$cache" \
		</dev/null >"$LV_DIR"/libvirtd.out 2>&1 &
	LV_DAEMON_PID=$!
	# libvirtd loads its drivers and checks (or probes again) its cache of
	# qemu's capabilities before it answers: 20-30 s in the emulated host.
	until virsh -q -c "$LV_URI" version >/dev/null 2>&1; do
		if ! kill -0 "$LV_DAEMON_PID" 2>/dev/null || [ $i -ge 1200 ]; then
			echo "nested-host: libvirtd did not come up; it said:"
			tail -n 20 "$LV_DIR"/libvirtd.out "$LV_DIR"/libvirtd.log 2>/dev/null
			lv_daemon_stop
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
}

# lv_daemon_stop: SIGTERM to libvirtd, SIGKILL after 10 s.
lv_daemon_stop() {
	local i=0

	[ -n "${LV_DAEMON_PID:-}" ] || return 0
	kill "$LV_DAEMON_PID" 2>/dev/null
	while kill -0 "$LV_DAEMON_PID" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$LV_DAEMON_PID" 2>/dev/null
	wait "$LV_DAEMON_PID" 2>/dev/null
	LV_DAEMON_PID=
}

# libvirt_guest_start: the guest as a transient domain (virsh create).
# Sets HGCLOCK_GUEST_PID to the qemu libvirt started (its pid file) and
# HGCLOCK_GUEST_QEMU_LOG to libvirt's log of that qemu (copied to the
# original HGCLOCK_GUEST_QEMU_LOG by libvirt_guest_stop).
libvirt_guest_start() {
	local t0 t1 t2 pid i=0

	t0=$(date +%s.%N)
	lv_daemon_start || return 1
	t1=$(date +%s.%N)
	lv_domain_xml >"$LV_DIR/$LV_DOMAIN.xml" || return 1
	if ! virsh -q -c "$LV_URI" create "$LV_DIR/$LV_DOMAIN.xml" >"$LV_DIR"/create.out 2>&1; then
		echo "nested-host: virsh create failed:"
		cat "$LV_DIR"/create.out
		tail -n 20 "$LV_DIR"/libvirtd.log "$LV_DIR/var-log/libvirt/qemu/$LV_DOMAIN.log" 2>/dev/null
		lv_daemon_stop
		return 1
	fi
	t2=$(date +%s.%N)
	# Written by libvirt before "create" returns; read it once it is whole.
	while ! pid=$(cat "/run/libvirt/qemu/$LV_DOMAIN.pid" 2>/dev/null) || [ -z "$pid" ]; do
		if [ $i -ge 100 ]; then
			echo "nested-host: no /run/libvirt/qemu/$LV_DOMAIN.pid"
			libvirt_guest_stop
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	case $pid in
	*[!0-9]*) echo "nested-host: bad pid file: '$pid'"; libvirt_guest_stop; return 1 ;;
	esac
	HGCLOCK_GUEST_PID=$pid
	LV_SAVED_QEMU_LOG=$HGCLOCK_GUEST_QEMU_LOG
	HGCLOCK_GUEST_QEMU_LOG=$LV_DIR/var-log/libvirt/qemu/$LV_DOMAIN.log
	export HGCLOCK_GUEST_PID HGCLOCK_GUEST_QEMU_LOG
	awk -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
		printf "nested-host: libvirt: libvirtd up in %.1f s, domain created in %.1f s\n",
			t1 - t0, t2 - t1 }'
	echo "nested-host: libvirt: domain $LV_DOMAIN, qemu pid $pid"
}

# libvirt_guest_exit_reason: how libvirt saw the domain's qemu end.
libvirt_guest_exit_reason() {
	grep -a 'shutting down, reason=' "$LV_DIR/var-log/libvirt/qemu/$LV_DOMAIN.log" 2>/dev/null |
		tail -n 1
}

# libvirt_guest_stop: virsh destroy (if still running), stop the daemon,
# keep libvirt's log of the guest and the end of its own in the original
# HGCLOCK_GUEST_QEMU_LOG, and all of its own next to it
# (guest-libvirtd.log).
libvirt_guest_stop() {
	local i=0

	if [ -n "${LV_DAEMON_PID:-}" ]; then
		if virsh -q -c "$LV_URI" domstate "$LV_DOMAIN" >/dev/null 2>&1; then
			virsh -q -c "$LV_URI" destroy "$LV_DOMAIN" >/dev/null 2>&1 ||
				echo "nested-host: virsh destroy $LV_DOMAIN failed"
		fi
		# destroy waits for qemu; a pid we were given is gone too.
		while [ -n "${HGCLOCK_GUEST_PID:-}" ] && kill -0 "$HGCLOCK_GUEST_PID" 2>/dev/null &&
			[ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		lv_daemon_stop
	fi
	if [ -n "${LV_SAVED_QEMU_LOG:-}" ]; then
		{
			cat "$LV_DIR/var-log/libvirt/qemu/$LV_DOMAIN.log" 2>/dev/null
			echo "--- libvirtd ($LV_DIR/libvirtd.log, libvirtd.out)"
			tail -n 50 "$LV_DIR"/libvirtd.log "$LV_DIR"/libvirtd.out 2>/dev/null
		} >"$LV_SAVED_QEMU_LOG"
		cp "$LV_DIR"/libvirtd.log "$(dirname "$LV_SAVED_QEMU_LOG")"/guest-libvirtd.log 2>/dev/null
		HGCLOCK_GUEST_QEMU_LOG=$LV_SAVED_QEMU_LOG
		LV_SAVED_QEMU_LOG=
	fi
}
export -f lv_xml_escape lv_domain_xml lv_config lv_daemon_start lv_daemon_stop \
	libvirt_guest_start libvirt_guest_exit_reason libvirt_guest_stop
export LV_DIR LV_DOMAIN LV_URI
