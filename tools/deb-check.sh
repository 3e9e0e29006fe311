#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Debian packages (debian/, Documentation/install.rst), built and checked
# without installing anything: `make deb` into a temporary BUILD (the build
# itself runs in a copy of the tree there), lintian on the result, the
# contents of each package (dpkg-deb -c, -e, -x into the temporary
# directory), the guest binary's libraries, the maintainer scripts, and that
# the build changed neither the source tree nor the machine (DKMS state,
# /lib/modules, installed packages).  Never dpkg -i, never dkms, never a
# module load.  Prints TAP lines deb.*; exits 1 when one fails.
#
#   tools/deb-check.sh [BUILD_DIR]     (BUILD_DIR: where the logs go)
set -eu -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-${BUILD:-build}}
log_dir="$build/check/deb"
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)

# shellcheck source=tools/tap.sh
. tools/tap.sh
# shellcheck disable=SC2034 # read by tap()
TAP_PREFIX=deb.

for tool in dpkg-buildpackage dh dh_dkms lintian rst2man; do
	if ! command -v "$tool" >/dev/null; then
		tap skip build "$tool is not installed (tools/deps.sh installs debhelper, dh-dkms, lintian)"
		exit 0
	fi
done

version=$(sed -n 's/^#define HGCLOCK_VERSION "\(.*\)"$/\1/p' user/hgclock.c)
[ -n "$version" ] || { tap not-ok version "no HGCLOCK_VERSION in user/hgclock.c"; exit 1; }

tmp=$(mktemp -d /tmp/hgclock-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# What a build must not change: DKMS's state, installed modules and packages,
# and the tree (dpkg-buildpackage's products go next to the tree it builds).
machine_state() {
	ls -A /var/lib/dkms /usr/src 2>/dev/null || true
	find /lib/modules -name 'hgclock.ko*' 2>/dev/null || true
	dpkg-query -W -f '${Package} ${Version} ${Status}\n' 'hgclock*' 2>/dev/null || true
}
tree_products() {
	(cd "$top" && ls -d debian/build debian/hgclock debian/hgclock-guest debian/hgclock-dkms \
		debian/libhgclock1 debian/libhgclock-dev debian/tmp ../libhgclock*.deb \
		debian/.debhelper debian/files debian/*.substvars debian/*.debhelper* \
		debian/debhelper-build-stamp ../hgclock*.deb ../hgclock_*.changes \
		../hgclock_*.buildinfo 2>/dev/null) || true
}
machine_before=$(machine_state)
tree_before=$(tree_products)

# ---- build --------------------------------------------------------------
start=$(date +%s)
if ! nice make -s BUILD="$tmp" deb >"$log_dir/make-deb.log" 2>&1; then
	tail -n 30 "$log_dir/make-deb.log" | sed 's/^/# /'
	[ ! -f "$tmp/deb/build.log" ] || cp "$tmp/deb/build.log" "$log_dir/"
	tap not-ok build "make deb failed, log $log_dir/make-deb.log"
	exit 1
fi
cp "$tmp/deb/build.log" "$log_dir/"
out=$tmp/deb
echo "# make deb: $(($(date +%s) - start)) s"
debs=""
for p in hgclock hgclock-guest hgclock-dkms libhgclock1 libhgclock-dev; do
	arch=amd64
	[ "$p" != hgclock-dkms ] || arch=all
	deb="$out/${p}_${version}_$arch.deb"
	if [ -f "$deb" ]; then
		debs="$debs $deb"
		echo "# $(basename "$deb"): $(stat -c %s "$deb") bytes"
	fi
done
if [ "$(wc -w <<<"$debs")" -eq 5 ]; then
	tap ok build
else
	tap not-ok build "expected hgclock, hgclock-guest, hgclock-dkms, libhgclock1, libhgclock-dev $version; got:$(cd "$out" && echo ./*.deb)"
	exit 1
fi
deb_hgclock="$out/hgclock_${version}_amd64.deb"
deb_guest="$out/hgclock-guest_${version}_amd64.deb"
deb_dkms="$out/hgclock-dkms_${version}_all.deb"
deb_lib="$out/libhgclock1_${version}_amd64.deb"
deb_dev="$out/libhgclock-dev_${version}_amd64.deb"

# ---- lintian: no error (warnings are listed; install.rst explains those left) --
set +e
lintian --fail-on error "$out/hgclock_${version}_amd64.changes" >"$log_dir/lintian.log" 2>&1
status=$?
set -e
# lintian says it should not run as root, which make check does: not a finding.
grep -v '^running with root privileges is not recommended!$' "$log_dir/lintian.log" |
	sed 's/^/# lintian: /' || true
errors=$(grep -c '^E: ' "$log_dir/lintian.log" || true)
warnings=$(grep -c '^W: ' "$log_dir/lintian.log" || true)
if [ $status -eq 0 ] && [ "$errors" -eq 0 ]; then
	tap ok lintian
elif [ $status -eq 1 ] || [ "$errors" -gt 0 ]; then
	tap not-ok lintian "$errors errors, $warnings warnings (log $log_dir/lintian.log)"
else
	tap not-ok lintian "lintian failed with status $status (log $log_dir/lintian.log)"
fi

# ---- contents --------------------------------------------------------------
# "PATH" per line, the leading ./ removed, files and links only.
files_of() {
	dpkg-deb -c "$1" | awk '$1 !~ /^d/ { p = $6; sub(/^\.\//, "", p); print p }' | sort
}
files_hgclock=$(files_of "$deb_hgclock")
files_guest=$(files_of "$deb_guest")
files_dkms=$(files_of "$deb_dkms")
files_lib=$(files_of "$deb_lib")
files_dev=$(files_of "$deb_dev")
has() { grep -qx -- "$2" <<<"$1"; }
# A TAP line from $m: ok when empty, else not ok with REASON.
verdict() {
	if [ -z "$m" ]; then tap ok "$1"; else tap not-ok "$1" "$2"; fi
}
missing() {		# $1: list, then the paths that must be in it
	local list=$1 m=""
	shift
	for f in "$@"; do has "$list" "$f" || m="$m $f"; done
	echo "$m"
}

mkdir -p "$tmp/x/hgclock" "$tmp/x/guest" "$tmp/x/dkms"
dpkg-deb -x "$deb_hgclock" "$tmp/x/hgclock"
dpkg-deb -x "$deb_guest" "$tmp/x/guest"
dpkg-deb -x "$deb_dkms" "$tmp/x/dkms"
for p in hgclock guest dkms; do
	deb=$deb_hgclock
	[ $p != guest ] || deb=$deb_guest
	[ $p != dkms ] || deb=$deb_dkms
	dpkg-deb -e "$deb" "$tmp/x/$p.ctl"
done

m=$(missing "$files_hgclock" usr/bin/hgclock usr/share/man/man1/hgclock.1.gz \
	usr/share/hgclock/perfetto_trace.proto)
if [ -n "$m" ]; then
	tap not-ok contents_hgclock "missing:$m"
elif [ "$("$tmp/x/hgclock/usr/bin/hgclock" --version | cut -d' ' -f2)" != "$version" ]; then
	tap not-ok contents_hgclock "the packaged hgclock is not version $version"
else
	tap ok contents_hgclock
fi

guest_cmds=$("$tmp/x/guest/usr/bin/hgclock-guest" --help |
	awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
m=$(missing "$files_guest" usr/bin/hgclock-guest lib/systemd/system/hgclock-agent.service \
	lib/udev/rules.d/60-hgclock.rules usr/lib/sysusers.d/hgclock.conf \
	usr/share/man/man1/hgclock-guest.1.gz)
for c in $guest_cmds; do
	has "$files_guest" "usr/share/man/man1/hgclock-$c.1.gz" || m="$m hgclock-$c.1.gz"
done
if [ -z "$guest_cmds" ]; then
	tap not-ok contents_guest "hgclock-guest --help lists no command"
elif [ -n "$m" ]; then
	tap not-ok contents_guest "missing:$m"
elif ! cmp -s "$tmp/x/guest/lib/udev/rules.d/60-hgclock.rules" tools/udev/60-hgclock.rules; then
	tap not-ok contents_guest "the packaged udev rule is not tools/udev/60-hgclock.rules"
elif ! grep -Eq '^g[[:space:]]+hgclock[[:space:]]' "$tmp/x/guest/usr/lib/sysusers.d/hgclock.conf"; then
	tap not-ok contents_guest "sysusers.d/hgclock.conf does not create the group hgclock"
else
	tap ok contents_guest
fi

# The module's sources: dkms.conf with the version written in, Kbuild, every
# object Kbuild names as a .c, the UAPI header; the modules-load entry there
# but commented out (not loaded at boot by default, install.rst).
src=usr/src/hgclock-$version
m=$(missing "$files_dkms" "$src/dkms.conf" "$src/Kbuild" "$src/include/uapi/linux/hgclock.h" \
	etc/modules-load.d/hgclock.conf)
# shellcheck disable=SC2013 # words: the object names
for o in $(sed -n 's/^hgclock-y[[:space:]]*:=//; T; :a; /\\$/ { N; s/\\\n//; ba }; p' Kbuild); do
	has "$files_dkms" "$src/${o%.o}.c" || m="$m $src/${o%.o}.c"
done
for f in module/*.c module/*.h; do
	cmp -s "$f" "$tmp/x/dkms/$src/$f" || m="$m $src/$f(differs)"
done
conf="$tmp/x/dkms/$src/dkms.conf"
if [ -n "$m" ]; then
	tap not-ok contents_dkms "missing:$m"
elif ! grep -qx "PACKAGE_VERSION=\"$version\"" "$conf" ||
	! grep -qx 'PACKAGE_NAME="hgclock"' "$conf" ||
	! grep -qx 'AUTOINSTALL="yes"' "$conf"; then
	tap not-ok contents_dkms "dkms.conf lacks PACKAGE_NAME=\"hgclock\", PACKAGE_VERSION=\"$version\" or AUTOINSTALL"
elif grep -v '^[[:space:]]*#' "$tmp/x/dkms/etc/modules-load.d/hgclock.conf" | grep -q '[^[:space:]]'; then
	tap not-ok contents_dkms "modules-load.d/hgclock.conf loads the module by default"
elif ! grep -qx '#hgclock' "$tmp/x/dkms/etc/modules-load.d/hgclock.conf"; then
	tap not-ok contents_dkms "modules-load.d/hgclock.conf has no '#hgclock' line to uncomment"
else
	tap ok contents_dkms
fi

# Every page of Documentation/man in exactly one of hgclock and hgclock-guest.
m=""
for rst in Documentation/man/*.rst; do
	page="usr/share/man/man1/$(basename "$rst" .rst).1.gz"
	n=0
	has "$files_hgclock" "$page" && n=$((n + 1))
	has "$files_guest" "$page" && n=$((n + 1))
	[ $n -eq 1 ] || m="$m $(basename "$rst" .rst)($n)"
done
verdict man_pages "pages not in exactly one package:$m"

# libhgclock (Documentation/library.rst): the library and its SONAME link in
# libhgclock1, the rest in libhgclock-dev; the .so link resolves within the
# two; hgclock.pc points at the multiarch libdir; the packaged library
# exports what the source's does.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libdir=usr/lib/$multiarch
so_real=$(grep -E "^$libdir/libhgclock\.so\.[0-9]+\.[0-9]+\.[0-9]+\$" <<<"$files_lib" || true)
m=$(missing "$files_lib" "$libdir/libhgclock.so.1")
[ -n "$so_real" ] || m="$m $libdir/libhgclock.so.1.*.*"
m="$m$(missing "$files_dev" "$libdir/libhgclock.so" "$libdir/pkgconfig/hgclock.pc" \
	usr/include/hgclock/hgclock.h usr/share/man/man3/hgclock_clock_open.3.gz \
	usr/share/man/man3/hgclock_clock_read.3.gz \
	usr/share/doc/libhgclock-dev/examples/hgclock-clock.c)"
mkdir -p "$tmp/x/lib"
dpkg-deb -x "$deb_lib" "$tmp/x/lib"
dpkg-deb -x "$deb_dev" "$tmp/x/lib"
pc="$tmp/x/lib/$libdir/pkgconfig/hgclock.pc"
if [ -n "${m// /}" ]; then
	tap not-ok contents_lib "missing:$m"
elif [ "$(readlink -f "$tmp/x/lib/$libdir/libhgclock.so")" != "$(readlink -f "$tmp/x/lib/$so_real")" ]; then
	tap not-ok contents_lib "$libdir/libhgclock.so does not lead to $so_real"
elif ! grep -qx "libdir=/$libdir" "$pc" || ! grep -qx 'includedir=/usr/include' "$pc"; then
	tap not-ok contents_lib "hgclock.pc: $(grep dir= "$pc" | tr '\n' ' ')"
elif [ "$(nm -D --defined-only "$tmp/x/lib/$so_real" | awk '{ print $3 }' | sed 's/@@.*//' | sort)" != \
	"$( { sed -n 's/^\(HGCLOCK_[0-9.]*\) {$/\1/p' user/lib/libhgclock.map
	      grep -oE '^[a-z][a-z_ ]*[ *]hgclock_[a-z_0-9]+\(' \
		user/lib/include/hgclock/hgclock.h | grep -oE 'hgclock_[a-z_0-9]+\($' | tr -d '('; } |
		sort)" ]; then
	tap not-ok contents_lib "the packaged library exports other symbols than <hgclock/hgclock.h> declares"
else
	tap ok contents_lib
fi

# ---- the guest binary needs no libtracecmd ----------------------------------
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
guest_needed=$(needed "$tmp/x/guest/usr/bin/hgclock-guest")
tool_needed=$(needed "$tmp/x/hgclock/usr/bin/hgclock")
guest_depends=$(dpkg-deb -f "$deb_guest" Depends)
echo "# hgclock-guest needs: $(tr '\n' ' ' <<<"$guest_needed"); Depends: $guest_depends"
if ! grep -q '^libc\.so' <<<"$guest_needed" || ! grep -q '^libtracecmd' <<<"$tool_needed"; then
	# The control: the full tool does link it, both lists were read.
	tap not-ok guest_no_libtracecmd "readelf: no libc in hgclock-guest or no libtracecmd in hgclock"
elif grep -Eq '^lib(tracecmd|traceevent|tracefs)' <<<"$guest_needed"; then
	tap not-ok guest_no_libtracecmd "hgclock-guest needs $(grep -E '^libtrace' <<<"$guest_needed" | tr '\n' ' ')"
elif grep -q 'libtrace' <<<"$guest_depends"; then
	tap not-ok guest_no_libtracecmd "hgclock-guest depends on $guest_depends"
else
	tap ok guest_no_libtracecmd
fi

# Its commands are hgclock's, with the same summaries and the same --help.
m=""
tool_help=$("$tmp/x/hgclock/usr/bin/hgclock" --help)
guest_help=$("$tmp/x/guest/usr/bin/hgclock-guest" --help)
for c in $guest_cmds; do
	line=$(grep -E "^  $c " <<<"$guest_help")
	grep -qxF -- "$line" <<<"$tool_help" || m="$m $c(summary)"
	a=$("$tmp/x/hgclock/usr/bin/hgclock" "$c" --help 2>&1 || true)
	b=$("$tmp/x/guest/usr/bin/hgclock-guest" "$c" --help 2>&1 || true)
	[ -n "$a" ] && [ "$a" = "$b" ] || m="$m $c(--help)"
done
set +e
"$tmp/x/guest/usr/bin/hgclock-guest" merge >/dev/null 2>&1
status=$?
set -e
[ $status -eq 2 ] || m="$m merge(exit $status, not 2)"
verdict guest_commands "differ from hgclock's:$m"

# ---- maintainer scripts and the unit -----------------------------------------
m=""
grep -q '/usr/lib/dkms/common.postinst' "$tmp/x/dkms.ctl/postinst" || m="$m dkms-postinst"
grep -q "dkms install -m hgclock -v \"$version\"" "$tmp/x/dkms.ctl/postinst" || m="$m all-kernels"
grep -q 'dkms remove' "$tmp/x/dkms.ctl/prerm" || m="$m dkms-prerm"
grep -q 'systemd-sysusers.* hgclock.conf' "$tmp/x/guest.ctl/postinst" || m="$m sysusers"
grep -q "deb-systemd-helper enable 'hgclock-agent.service'" "$tmp/x/guest.ctl/postinst" ||
	m="$m unit-enable"
for s in "$tmp"/x/*.ctl/{pre,post}{inst,rm}; do
	[ -f "$s" ] || continue
	sh -n "$s" || m="$m $(basename "$(dirname "$s")")/$(basename "$s")(syntax)"
	! grep -Eq '#[A-Za-z0-9_.+]+#' "$s" || m="$m $(basename "$(dirname "$s")")/$(basename "$s")(token)"
done
verdict maintscripts "missing or wrong:$m"

unit="$tmp/x/guest/lib/systemd/system/hgclock-agent.service"
if ! command -v systemd-analyze >/dev/null; then
	tap skip unit "no systemd-analyze"
else
	# The binary is not installed here: that one complaint is expected.
	complaints=$(systemd-analyze verify --man=no "$unit" 2>&1 |
		grep -v 'Command /usr/bin/hgclock-guest is not executable' || true)
	if [ -n "$complaints" ]; then
		tap not-ok unit "systemd-analyze verify: $(tr '\n' ' ' <<<"$complaints")"
	elif ! grep -qx "ExecStart=/usr/bin/hgclock-guest agent \$HGCLOCK_AGENT_ARGS" "$unit" ||
		! grep -qx 'ConditionVirtualization=vm' "$unit"; then
		tap not-ok unit "hgclock-agent.service does not run 'hgclock-guest agent' in VMs only"
	else
		tap ok unit
	fi
fi

# ---- nothing changed but the temporary directory ---------------------------------
machine_after=$(machine_state)
tree_after=$(tree_products)
if [ "$machine_before" != "$machine_after" ]; then
	tap not-ok no_system_change "DKMS, /lib/modules or packages changed: $(diff <(echo "$machine_before") <(echo "$machine_after") | grep '^[<>]' | tr '\n' ' ')"
elif [ "$tree_before" != "$tree_after" ]; then
	tap not-ok no_system_change "the build wrote into the tree or its parent: $(diff <(echo "$tree_before") <(echo "$tree_after") | grep '^[<>]' | tr '\n' ' ')"
else
	tap ok no_system_change
fi
[ "$tap_failed" -eq 0 ]
