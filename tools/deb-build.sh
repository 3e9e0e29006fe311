#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make deb`: builds the Debian packages (debian/) with dpkg-buildpackage in a
# copy of the source tree, OUT_DIR/hgclock-VERSION, so that neither the tree
# (debian/build, debian/<package>/) nor its parent directory (where
# dpkg-buildpackage puts the .debs, next to the tree it builds) is written.
# The .debs, .buildinfo and .changes land in OUT_DIR.  Compiles user space
# only: the module is built by DKMS where hgclock-dkms gets installed, never
# here.  Unsigned (-us -uc), binary packages only (-b).
#
#   tools/deb-build.sh OUT_DIR         (make deb: OUT_DIR = $(BUILD)/deb)
#
# Exits 0 with the .debs' paths on standard output, else 1 with the reason.
set -eu -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }

fail() {
	echo "deb-build: $*" >&2
	exit 1
}

for tool in dpkg-buildpackage dh dh_dkms rst2man; do
	command -v "$tool" >/dev/null ||
		fail "$tool not found: tools/deps.sh installs debhelper, dh-dkms, python3-docutils"
done

version=$(sed -n 's/^#define HGCLOCK_VERSION "\(.*\)"$/\1/p' "$top/user/hgclock.c")
[ -n "$version" ] || fail "no HGCLOCK_VERSION in user/hgclock.c"
deb_version=$(cd "$top" && dpkg-parsechangelog -S Version)
[ "$deb_version" = "$version" ] ||
	fail "debian/changelog is at $deb_version, HGCLOCK_VERSION at $version: add a changelog entry"

mkdir -p "$1"
out=$(cd "$1" && pwd)
case "$out/" in
("$top"/debian/* | "$top"/user/* | "$top"/module/*) fail "OUT_DIR $out is inside the sources" ;;
esac
src="$out/hgclock-$version"
rm -rf "$src"
rm -f "$out"/hgclock*.deb "$out"/libhgclock*.deb "$out"/hgclock_*.buildinfo "$out"/hgclock_*.changes
mkdir -p "$src"

# What the packages are built from, without build products of the tree
# (an in-tree Kbuild run leaves module/*.o and friends).
(cd "$top" && tar -cf - --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
	--exclude='*.mod.c' --exclude='.*.cmd' --exclude='*.a' --exclude=__pycache__ \
	--exclude=Module.symvers --exclude=modules.order \
	--exclude=debian/build --exclude='debian/hgclock*/' --exclude='debian/libhgclock*/' \
	--exclude=debian/tmp --exclude='debian/.debhelper' \
	--exclude='debian/*.substvars' --exclude='debian/*debhelper*' --exclude=debian/files \
	Makefile Kbuild dkms.conf README.md include module user Documentation debian \
	tools/udev tools/pkg tools/kdir.sh tools/examples) | tar -C "$src" -xf -

log="$out/build.log"
start=$(date +%s)
if ! (cd "$src" && nice dpkg-buildpackage -b -us -uc) >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	fail "dpkg-buildpackage failed (log $log)"
fi
echo "deb-build: built in $(($(date +%s) - start)) s (log $log)" >&2
ls "$out"/hgclock*_"$version"_*.deb "$out"/libhgclock*_"$version"_*.deb
