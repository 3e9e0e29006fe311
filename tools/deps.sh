#!/bin/sh
# tools/deps.sh - install the Debian packages hgclock needs to build and
# to boot its test VMs. Idempotent: when everything is installed it prints
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
sparse
libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
linux-perf
kernelshark libkshark-dev libjson-c-dev xvfb xdotool imagemagick
protobuf-c-compiler libprotobuf-c-dev protobuf-compiler"

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

todo=$(missing)
if [ -z "$todo" ]; then
	echo "$prog: all $(echo $PKGS | wc -w) packages installed"
	exit 0
fi

echo "$prog: missing or not configured:" $todo
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
[ -n "$todo" ] || { echo "$prog: done"; exit 0; }

install() {
	# shellcheck disable=SC2086
	apt-get install -y --no-install-recommends $lock \
		-o Dpkg::Options::=--force-confold $todo
}

if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
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
echo "$prog: done"
