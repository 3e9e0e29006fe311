#!/bin/bash
# `make install install-module DESTDIR=<tmp>` (user space, then the module
# for one kernel: complementary, no file in both) and `make uninstall
# uninstall-module DESTDIR=<tmp>`, checked:
# the exact list of files installed with their modes, the module in the
# directory of the kernel it was built for, the udev rule's group and
# mode, and nothing left after uninstall.  With DESTDIR set, install must
# neither create the group nor run depmod: the group's state is compared.
# Exits 0 when all holds, else 1 with the reason on its last line.
#
#   tools/install-check.sh [BUILD_DIR]     (make check: check.install_destdir)
set -eu -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-${BUILD:-build}}
log_dir="$build/check"
mkdir -p "$log_dir"
log="$log_dir/install.log"

fail() {
	echo "install-check: $*" >&2
	exit 1
}

kdir=$(tools/kdir.sh) || fail "no kernel headers to build the module against (tools/deps.sh)"
dest=$(mktemp -d /tmp/hgclock-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
group_before=$(getent group hgclock || true)

if ! nice make -s BUILD="$build" KDIR="$kdir" DESTDIR="$dest" install >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	fail "make install DESTDIR=$dest failed (log $log)"
fi
# The module is install-module's (or DKMS's) alone.
[ ! -e "$dest/lib/modules" ] || fail "make install installed a module: $(cd "$dest" && find lib/modules -type f)"
if ! nice make -s BUILD="$build" KDIR="$kdir" DESTDIR="$dest" install-module >>"$log" 2>&1; then
	tail -n 20 "$log" >&2
	fail "make install-module DESTDIR=$dest failed (log $log)"
fi

ko=$(cd "$dest" && ls lib/modules/*/updates/hgclock.ko 2>/dev/null | head -n 1)
[ -n "$ko" ] || fail "no lib/modules/*/updates/hgclock.ko installed"
kver=${ko#lib/modules/}
kver=${kver%%/*}
vermagic=$(modinfo -F vermagic "$dest/$ko")
[ "${vermagic%% *}" = "$kver" ] ||
	fail "$ko was built for '${vermagic%% *}', not for the kernel of its directory"

# libhgclock's real name, libhgclock.so.MAJOR.MINOR.PATCH, as built.
so=$(cd "$build/user" && ls libhgclock.so.*.*.*) || fail "no $build/user/libhgclock.so.*.*.*"
# The exact list, "MODE PATH", sorted.
expected=$( {
	echo "644 lib/modules/$kver/updates/hgclock.ko"
	echo "755 usr/local/bin/hgclock"
	echo "644 etc/udev/rules.d/60-hgclock.rules"
	echo "644 usr/local/share/hgclock/perfetto_trace.proto"
	for rst in Documentation/man/*.rst; do
		page=$(basename "$rst" .rst)
		echo "644 usr/local/share/man/man1/$page.1"
	done
	# libhgclock (Documentation/library.rst); its two links below.
	echo "644 usr/local/lib/$so"
	echo "644 usr/local/include/hgclock/hgclock.h"
	echo "644 usr/local/lib/pkgconfig/hgclock.pc"
	for f in hgclock_clock_open hgclock_clock_read hgclock_clock_perf_ns hgclock_clock_close \
		hgclock_clock_strerror hgclock_lib_version hgclock_events_open hgclock_event \
		hgclock_events_flush hgclock_events_close; do
		echo "644 usr/local/share/man/man3/$f.3"
	done
} | sort -k 2)
actual=$(cd "$dest" && find . -type f -printf '%m %P\n' | sort -k 2)
if [ "$expected" != "$actual" ]; then
	diff <(echo "$expected") <(echo "$actual") | sed 's/^/# /' >&2 || true
	fail "installed files differ from the expected list (< expected, > installed)"
fi
others=$(cd "$dest" && find . ! -type f ! -type d -printf '%P -> %l\n' | sort)
links=$(printf '%s\n' "usr/local/lib/libhgclock.so -> ${so%.*.*}" \
	"usr/local/lib/${so%.*.*} -> $so")
[ "$others" = "$links" ] || fail "installed other links or non-files than the library's: $others"
grep -qx 'libdir=/usr/local/lib' "$dest/usr/local/lib/pkgconfig/hgclock.pc" ||
	fail "hgclock.pc does not name the install's libdir /usr/local/lib"

rule="$dest/etc/udev/rules.d/60-hgclock.rules"
grep -Eq '^KERNEL=="hgclock",.*GROUP="hgclock".*MODE="0660"' "$rule" ||
	fail "the udev rule does not give /dev/hgclock group hgclock, mode 0660"
"$dest/usr/local/bin/hgclock" --version | grep -q '^hgclock ' ||
	fail "the installed tool does not run"

[ "$(getent group hgclock || true)" = "$group_before" ] ||
	fail "install with DESTDIR changed the system's group hgclock"

if ! make -s BUILD="$build" KDIR="$kdir" DESTDIR="$dest" uninstall uninstall-module >>"$log" 2>&1; then
	tail -n 20 "$log" >&2
	fail "make uninstall uninstall-module DESTDIR=$dest failed (log $log)"
fi
left=$(cd "$dest" && find . ! -type d -printf '%P\n')
[ -z "$left" ] || fail "left after uninstall: $left"
echo "install-check: $(echo "$expected" | wc -l) files installed for $kver with the expected modes; uninstall removed them"
