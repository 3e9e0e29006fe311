#!/bin/sh
# tools/deps.sh - install the Debian packages hgclock needs to build and
# to boot its test VMs (QEMU from bookworm-backports, below). Idempotent: when everything is installed it prints
# one line and exits 0 without touching apt. Otherwise (as root) it
# finishes interrupted dpkg runs, installs what is missing, and runs
# "apt-get update" only if the package lists are absent or the install
# fails with the lists it has.

set -eu

PKGS="linux-image-amd64 linux-headers-amd64
linux-image-6.12-amd64 linux-headers-6.12-amd64
linux-image-6.12-rt-amd64 linux-headers-6.12-rt-amd64
qemu-system-x86 busybox-static kmod cpio
libtraceevent-dev libtracefs-dev libtracecmd-dev trace-cmd libzstd-dev
linux-source-6.1 pkg-config xz-utils zstd gcc make
clang libclang-rt-14-dev python3 util-linux
dkms python3-docutils
debhelper dh-dkms lintian
flex bison bc libelf-dev libssl-dev
sparse pahole
libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
linux-perf
kernelshark libkshark-dev libjson-c-dev xvfb xdotool imagemagick
protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
liblttng-ust-dev lttng-tools"

prog=${0##*/}

die() {
	echo "$prog: $*" >&2
	exit 1
}

# Packages not fully installed ("install ok installed"), one per line.
missing() {
	# shellcheck disable=SC2086
	dpkg-query -W -f='${Package} ${Status}\n' $PKGS 2>/dev/null |
		awk -v pkgs="$(echo $PKGS)" '$4 == "installed" { ok[$1] = 1 }
		     END { n = split(pkgs, p, " ")
			   for (i = 1; i <= n; i++) if (!(p[i] in ok)) print p[i] }'
}

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: not a Debian system?"

# The emulator: QEMU 10.0 from Debian 12's bookworm-backports by default
# (HGCLOCK_QEMU=backports), QEMU 7.2 from bookworm itself with
# HGCLOCK_QEMU=debian.  Only qemu-system-x86 and what it needs at newer
# versions come from backports (apt's -t for that one install; the suite
# is NotAutomatic, so nothing else ever upgrades from it).  Why:
# Documentation/testing.rst, "The emulator".
qemu_from=${HGCLOCK_QEMU:-backports}
qemu_min=1:10.0
case $qemu_from in
backports | debian) ;;
*) die "HGCLOCK_QEMU=$qemu_from: backports or debian" ;;
esac

# qemu_ok: the installed qemu-system-x86 is the one asked for.
qemu_ok() {
	local v
	v=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null) || return 1
	[ -n "$v" ] || return 1
	if [ "$qemu_from" = backports ]; then
		dpkg --compare-versions "$v" ge "$qemu_min"
	else
		dpkg --compare-versions "$v" lt "$qemu_min"
	fi
}

# backports_source: the bookworm-backports suite from the mirror the
# machine already uses for bookworm, in a file of our own.
backports_list=/etc/apt/sources.list.d/hgclock-bookworm-backports.list
backports_source() {
	local uri
	[ -s "$backports_list" ] && return 1
	uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -v -- '-security' | head -n 1)
	[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' \
		/etc/apt/sources.list 2>/dev/null)
	[ -n "$uri" ] || die "no Debian mirror found in apt's sources for bookworm-backports"
	echo "deb $uri bookworm-backports main" >"$backports_list"
	echo "$prog: added bookworm-backports ($uri) in $backports_list"
}

todo=$(missing)
if [ -z "$todo" ] && qemu_ok; then
	echo "$prog: all $(echo $PKGS | wc -w) packages installed, qemu-system-x86" \
		"$(dpkg-query -W -f='${Version}' qemu-system-x86) ($qemu_from)"
	exit 0
fi

[ -z "$todo" ] || echo "$prog: missing or not configured:" $todo
qemu_ok || echo "$prog: qemu-system-x86 is not the $qemu_from one"
[ "$(id -u)" -eq 0 ] || die "must run as root to install them"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found"

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg instead of failing on its lock.
lock="-o DPkg::Lock::Timeout=900"

# Half-installed packages (an interrupted dpkg run) need configuring first.
if dpkg --audit 2>/dev/null | grep -q .; then
	echo "$prog: finishing an interrupted dpkg run"
	dpkg --configure -a || true
	# shellcheck disable=SC2086
	apt-get -y $lock -o Dpkg::Options::=--force-confold install -f || true
fi

todo=$(missing)

install() {
	# shellcheck disable=SC2086
	apt-get install -y --no-install-recommends $lock \
		-o Dpkg::Options::=--force-confold $todo
}

if [ -z "$todo" ]; then
	:
elif ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
	# shellcheck disable=SC2086
	apt-get update $lock || die "apt-get update failed"
	install || die "apt-get install failed"
elif ! install; then
	echo "$prog: install failed with the current package lists; updating them"
	# shellcheck disable=SC2086
	apt-get update $lock || die "apt-get update failed"
	install || die "apt-get install failed"
fi

todo=$(missing)
[ -z "$todo" ] || die "still not installed:" $todo

if ! qemu_ok; then
	if [ "$qemu_from" = backports ]; then
		echo "$prog: qemu-system-x86 from bookworm-backports (QEMU 10)"
		if backports_source || ! apt-cache policy qemu-system-x86 2>/dev/null | grep -q bookworm-backports; then
			# shellcheck disable=SC2086
			apt-get update $lock || die "apt-get update failed"
		fi
		# shellcheck disable=SC2086
		apt-get install -y --no-install-recommends $lock -o Dpkg::Options::=--force-confold \
			-t bookworm-backports qemu-system-x86 || die "installing QEMU from bookworm-backports failed"
	else
		echo "$prog: qemu-system-x86 from bookworm (QEMU 7.2)"
		# shellcheck disable=SC2086
		apt-get install -y --no-install-recommends --allow-downgrades $lock \
			-o Dpkg::Options::=--force-confold qemu-system-x86/bookworm \
			qemu-system-common/bookworm qemu-system-data/bookworm ||
			die "installing QEMU 7.2 failed"
	fi
	qemu_ok || die "qemu-system-x86 $(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null) is not the $qemu_from one"
fi
echo "$prog: done, qemu-system-x86 $(dpkg-query -W -f='${Version}' qemu-system-x86) ($qemu_from)"
