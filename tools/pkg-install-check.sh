#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Debian packages installed the way a user installs them, and used:
#
#  1. here, in a private mount namespace: an overlay over this machine's
#     root (upper layer BUILD/pkg-install/upper, on disk), entered with
#     chroot; dpkg -i of the five packages of `make deb` (services are not
#     started: a policy-rc.d says so, as in any chroot); hgclock-dkms's
#     postinst has DKMS build the module for every kernel with headers.
#     Nothing of the machine changes: every write lands in the upper layer.
#  2. in a VM per kernel series (tools/vm/run): the upper layer over the
#     VM's root (a read-only overlay), entered with chroot; modprobe loads
#     the module DKMS installed, the installed tool and the installed
#     library work, the example of libhgclock-dev builds with pkg-config
#     and reads the clock as nobody (selftests/pkg/installed.sh).
#
# Prints TAP lines pkg.*; exits 1 when one fails.
#
#   tools/pkg-install-check.sh [BUILD_DIR] [KERNEL_SPEC...]
set -u -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-build}
shift || true
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(6.12)
# shellcheck source=tools/tap.sh
. tools/tap.sh
# shellcheck disable=SC2034 # read by tap()
TAP_PREFIX=pkg.

for tool in dpkg-buildpackage dh dh_dkms dkms unshare chroot; do
	if ! command -v "$tool" >/dev/null; then
		tap skip install "$tool is not installed (tools/deps.sh installs it)"
		exit 0
	fi
done
if [ "$(id -u)" -ne 0 ]; then
	tap skip install "needs root (a mount namespace and chroot)"
	exit 0
fi

case $build in
/*) dir=$build/pkg-install ;;
*) dir=$top/$build/pkg-install ;;
esac
rm -rf "$dir"
mkdir -p "$dir/debs" "$dir/upper" "$dir/work" "$dir/root" || exit 1
if ! tools/deb-build.sh "$dir/debs" >"$dir/deb-build.log" 2>&1; then
	tap not-ok build_debs "tools/deb-build.sh failed: $(tail -n 3 "$dir/deb-build.log" | tr '\n' ' ')"
	exit 1
fi
tap ok build_debs

# 1. dpkg -i in a chroot over an overlay, in a mount namespace of its own.
t0=$(date +%s)
unshare -m --propagation private bash -s "$dir" >"$dir/install.log" 2>&1 <<'EOS'
set -eu
dir=$1
root=$dir/root
mount -t overlay overlay -o "lowerdir=/,upperdir=$dir/upper,workdir=$dir/work" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/tmp"
mount -t tmpfs tmpfs "$root/run"
mkdir -p "$root/tmp/debs"
cp "$dir"/debs/*.deb "$root/tmp/debs/"
# No service starts in a chroot.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
rm -f "$root/etc/dkms/no-autoinstall"
cd /
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	DEBIAN_FRONTEND=noninteractive sh -c '
	ls /tmp/debs/*.deb | grep -v dbgsym | xargs dpkg -i
	echo "DPKG-EXIT $?"
	for p in hgclock-dkms hgclock-guest hgclock libhgclock1 libhgclock-dev; do
		dpkg -s $p | sed -n "s/^Status: /STATUS $p /p"
	done
	dkms status -m hgclock | sed "s/^/DKMS /"
	getent group hgclock | sed "s/^/GROUP /"
'
rm -f "$root/usr/sbin/policy-rc.d"
EOS
rc=$?
t1=$(date +%s)
sed 's/^/# install: /' "$dir/install.log" | grep -E 'DPKG-EXIT|STATUS|DKMS|GROUP|rror' | head -n 30
echo "# dpkg -i and the DKMS builds took $((t1 - t0)) s"
tap_check() {	# NAME WHY COMMAND...
	local name=$1 why=$2
	shift 2
	if "$@"; then tap ok "$name"; else tap not-ok "$name" "$why"; fi
}
tap_check dpkg_install "install script exit $rc, see $dir/install.log" \
	grep -q '^DPKG-EXIT 0$' "$dir/install.log"
for p in hgclock-dkms hgclock-guest hgclock libhgclock1 libhgclock-dev; do
	tap_check "installed_$p" "not 'install ok installed'" \
		grep -q "^STATUS $p install ok installed$" "$dir/install.log"
done
tap_check group_created "no group hgclock" grep -q '^GROUP hgclock:' "$dir/install.log"
# Nothing outside the upper layer: the machine has no hgclock package.
tap_check machine_unchanged "hgclock is installed on this machine itself" \
	sh -c '! dpkg -s hgclock >/dev/null 2>&1 && ! dkms status -m hgclock 2>/dev/null | grep -q .'

# 2. In a VM per kernel: the installed module, tool and library.
. tools/vm/lib.sh
for spec in "${specs[@]}"; do
	kver=$(vm_series_kernel "$spec")
	[ -n "$kver" ] || { tap skip "vm_$spec" "no kernel $spec installed"; continue; }
	# /lib is /usr/lib on Debian 12 (merged /usr).
	ko=$(ls "$dir"/upper/usr/lib/modules/"$kver"/updates/dkms/hgclock.ko* \
		"$dir"/upper/lib/modules/"$kver"/updates/dkms/hgclock.ko* 2>/dev/null | head -n 1)
	tap_check "dkms_built_$spec" "no hgclock.ko for $kver in the upper layer (DKMS log: $dir/upper/var/lib/dkms/hgclock)" \
		[ -n "$ko" ]
	[ -n "$ko" ] || continue
	tools/vm/run --kernel "$kver" --timeout 600 --log-dir "$dir/vm-$spec" \
		-- "selftests/pkg/installed.sh '$dir/upper'" >"$dir/vm-$spec.out" 2>&1
	vrc=$?
	# Its lines renumbered into this script's, prefixed vm_SPEC.
	while IFS= read -r line; do
		case $line in
		"ok "*) line=${line#ok }; tap ok "vm_${spec}.${line#* }" ;;
		"not ok "*)
			line=${line#not ok }
			line=${line#* }
			tap not-ok "vm_${spec}.${line%% # *}" "${line#* # }" ;;
		*) echo "$line" ;;
		esac
	done < <(grep -E '^(not )?ok [0-9]+ |^# ' "$dir/vm-$spec.out")
	tap_check "vm_$spec" "tools/vm/run exit $vrc, see $dir/vm-$spec.out" [ $vrc -eq 0 ]
done
[ "$tap_failed" -eq 0 ]
