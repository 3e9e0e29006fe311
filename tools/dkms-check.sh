#!/bin/bash
# The DKMS package, tested without touching the machine's DKMS state:
# `make dkms-src` into a temporary root, then `dkms add` and `dkms build`
# with --sourcetree/--dkmstree/--installtree inside it, for every kernel
# whose headers are installed (/lib/modules/<kernel>/build), one TAP line
# each; then `dkms remove` and a check that nothing was left behind.
# Never installs or loads the module.  Prints TAP lines dkms.*.
#
#   tools/dkms-check.sh [BUILD_DIR]      (BUILD_DIR: where the logs go)
set -eu -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-${BUILD:-build}}
log_dir="$build/check/dkms"
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)

# shellcheck source=tools/tap.sh
. tools/tap.sh
TAP_PREFIX=dkms.

if ! command -v dkms >/dev/null; then
	tap skip build "dkms is not installed (tools/deps.sh installs it)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	tap skip build "dkms needs root"
	exit 0
fi

version=$(sed -n 's/^#define HGCLOCK_VERSION "\(.*\)"$/\1/p' user/hgclock.c)
[ -n "$version" ] || { tap not-ok version "no HGCLOCK_VERSION in user/hgclock.c"; exit 1; }

tmp=$(mktemp -d /tmp/hgclock-dkms.XXXXXX)
src="$tmp/root/usr/src"
opts=(--sourcetree "$src" --dkmstree "$tmp/dkms" --installtree "$tmp/modules")
mkdir -p "$src" "$tmp/dkms" "$tmp/modules"
state() { ls -A /var/lib/dkms /usr/src 2>/dev/null || true; }
state_before=$(state)
cleanup() {
	dkms remove -m hgclock -v "$version" --all "${opts[@]}" >>"$log_dir/remove.log" 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# dkms signs what it builds, with a key it creates in /var/lib/dkms when
# there is none: give it a throw-away key here instead (bash variables of
# dkms that /etc/dkms/framework.conf may set; it does not on Debian).
export mok_signing_key="$tmp/mok.key" mok_certificate="$tmp/mok.pub"

make -s dkms-src DESTDIR="$tmp/root" >"$log_dir/src.log" 2>&1 ||
	{ cat "$log_dir/src.log"; tap not-ok add "make dkms-src failed"; exit 1; }
if dkms add -m hgclock -v "$version" "${opts[@]}" >"$log_dir/add.log" 2>&1 &&
	dkms status -m hgclock -v "$version" "${opts[@]}" 2>&1 | grep -q "^hgclock/$version: added"; then
	tap ok add
else
	cat "$log_dir/add.log"
	tap not-ok add "dkms add hgclock/$version failed (PACKAGE_VERSION from dkms.conf?)"
	exit 1
fi

kernels=$(for b in /lib/modules/*/build; do
	[ -f "$b/Makefile" ] && basename "$(dirname "$b")"; done | sort -V)
[ -n "$kernels" ] || tap skip build "no kernel headers in /lib/modules/*/build"
for k in $kernels; do
	name="build_$k"
	if ! nice dkms build -m hgclock -v "$version" -k "$k" "${opts[@]}" >"$log_dir/$k.log" 2>&1; then
		tail -n 20 "$log_dir/$k.log" | sed 's/^/# /'
		find "$tmp/dkms/hgclock/$version/build" -name make.log -exec tail -n 20 {} + 2>/dev/null | sed 's/^/# /'
		tap not-ok "$name" "dkms build failed, log $log_dir/$k.log"
		continue
	fi
	ko=$(ls "$tmp/dkms/hgclock/$version/$k"/*/module/hgclock.ko* 2>/dev/null | head -n 1)
	vermagic=$( [ -n "$ko" ] && modinfo -F vermagic "$ko" 2>/dev/null || true)
	if [ -z "$ko" ]; then
		tap not-ok "$name" "dkms build succeeded but left no hgclock.ko"
	elif [ "${vermagic%% *}" != "$k" ]; then
		tap not-ok "$name" "vermagic '$vermagic' is not for $k"
	else
		tap ok "$name"
	fi
done

dkms remove -m hgclock -v "$version" --all "${opts[@]}" >"$log_dir/remove.log" 2>&1 || true
left=$(dkms status -m hgclock "${opts[@]}" 2>/dev/null || true)
state_after=$(state)
if [ -n "$left" ]; then
	tap not-ok no_state_left "dkms status after remove: $left"
elif [ "$state_before" != "$state_after" ]; then
	tap not-ok no_state_left "/var/lib/dkms or /usr/src changed: $(diff <(echo "$state_before") <(echo "$state_after") | grep '^[<>]' | tr '\n' ' ')"
else
	tap ok no_state_left
fi
[ "$tap_failed" -eq 0 ]
