#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libhgclock.so for applications (Documentation/library.rst), without the
# module: `make install-lib` into a temporary DESTDIR installs exactly the
# library, its links, <hgclock/hgclock.h>, hgclock.pc and the section 3
# pages; the library exports the documented functions alone (the header's
# declarations, user/lib/libhgclock.map and the man page agree, and nm -D
# shows nothing else); the header compiles alone as C and C++; the example
# program tools/examples/hgclock-clock.c builds with `pkg-config --cflags
# --libs hgclock` against the DESTDIR, runs from it (LD_LIBRARY_PATH) and
# uses the versioned API only, while the tool's internals do not link;
# without a device it fails with the documented errno and advice;
# Documentation/library.rst shows that very example; uninstall-lib
# removes everything.
#
# The Makefile installs it as BUILD/unit/test_libso with the source tree
# and build directory filled in; make unit runs it.  TAP on stdout.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=${HGCLOCK_TOP:-@TOP@}
case $top in @*) top=$(cd "$here/../.." && pwd) ;; esac
build=@BUILD@
case $build in @*) build=$(cd "$here/.." && pwd) ;; esac

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n libso.$1"; }
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n libso.$1${2:+ # $2}"
}
skip() { n=$((n + 1)); echo "ok $n libso.$1 # SKIP $2"; }
# check NAME REASON COMMAND...: ok when COMMAND succeeds.
check() {
	local name=$1 reason=$2
	shift 2
	if "$@"; then ok "$name"; else not_ok "$name" "$reason"; fi
}

for t in pkg-config nm readelf; do
	command -v $t >/dev/null || { echo "1..0 # SKIP no $t"; exit 0; }
done
cc=${CC:-cc}
tmp=$(mktemp -d /tmp/hgclock-libso.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
hdr=$top/user/lib/include/hgclock/hgclock.h
map=$top/user/lib/libhgclock.map
page=$top/Documentation/man/man3/hgclock_clock_open.rst
page_ev=$top/Documentation/man/man3/hgclock_events_open.rst
example=$top/tools/examples/hgclock-clock.c

# A make of the tree, not of the `make unit` that runs us (no jobserver of
# its, no kernel tree looked for): everything is built, it only installs.
tree_make() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top" BUILD="$build" \
		KDIR=/nonexistent KVER=none DESTDIR="$dest" PREFIX=/usr "$@"
}

# ---- install ----------------------------------------------------------------
if ! tree_make install-lib >"$tmp/install.log" 2>&1; then
	not_ok install "make install-lib failed: $(tail -n 5 "$tmp/install.log" | tr '\n' ' ')"
	echo "1..$n"
	exit 1
fi
ok install
major=$(sed -n 's/^#define HGCLOCK_LIB_VERSION_MAJOR[[:space:]]*\([0-9]*\)$/\1/p' "$hdr")
minor=$(sed -n 's/^#define HGCLOCK_LIB_VERSION_MINOR[[:space:]]*\([0-9]*\)$/\1/p' "$hdr")
patch=$(sed -n 's/^#define HGCLOCK_LIB_VERSION_PATCH[[:space:]]*\([0-9]*\)$/\1/p' "$hdr")
version=$major.$minor.$patch
lib=$dest/usr/lib/libhgclock.so.$version

# "MODE TYPE PATH -> TARGET", sorted: files and links, nothing else.
expected=$( {
	echo "644 f usr/lib/libhgclock.so.$version -> "
	echo "777 l usr/lib/libhgclock.so.$major -> libhgclock.so.$version"
	echo "777 l usr/lib/libhgclock.so -> libhgclock.so.$major"
	echo "644 f usr/include/hgclock/hgclock.h -> "
	echo "644 f usr/lib/pkgconfig/hgclock.pc -> "
	for f in hgclock_clock_open hgclock_clock_read hgclock_clock_perf_ns hgclock_clock_close \
		hgclock_clock_strerror hgclock_lib_version hgclock_events_open hgclock_event \
		hgclock_events_flush hgclock_events_close; do
		echo "644 f usr/share/man/man3/$f.3 -> "
	done
} | sort -k 3)
actual=$(cd "$dest" && find . ! -type d -printf '%m %y %P -> %l\n' | sort -k 3)
if [ "$expected" = "$actual" ]; then
	ok installed_files
else
	not_ok installed_files "differ (< expected, > installed): $(diff <(echo "$expected") <(echo "$actual") | grep '^[<>]' | tr '\n' ' ')"
fi
check installed_header_is_source "the installed header is not $hdr" \
	cmp -s "$hdr" "$dest/usr/include/hgclock/hgclock.h"
soname=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check soname "SONAME '$soname', want libhgclock.so.$major" [ "$soname" = "libhgclock.so.$major" ]
if grep -q '^\.so man3/hgclock_clock_open\.3$' "$dest/usr/share/man/man3/hgclock_clock_read.3" &&
	grep -Eq '^\.TH "?HGCLOCK_CLOCK_OPEN"? "?3"?' "$dest/usr/share/man/man3/hgclock_clock_open.3"; then
	ok man_pages
else
	not_ok man_pages "hgclock_clock_open.3 is not a section 3 page, or hgclock_clock_read.3 no link to it"
fi

# ---- the exported symbols are the documented ones -------------------------------
# The header's function declarations, the map's globals, the man page's
# SYNOPSIS and the library's dynamic symbols: one list.
from_header=$(grep -oE '^[a-z][a-z_ ]*[ *]hgclock_[a-z_0-9]+\(' "$hdr" |
	grep -oE 'hgclock_[a-z_0-9]+\($' | tr -d '(' | sort)
from_map=$(sed -n '/global:/,/local:/p' "$map" | grep -oE '^[[:space:]]*hgclock_[a-z_0-9]+;' |
	tr -d ' \t;' | sort)
from_page=$(cat "$page" "$page_ev" | sed -n '/^SYNOPSIS$/,/^DESCRIPTION$/p' |
	grep -oE 'hgclock_[a-z_0-9]+\\?\(' | tr -d '\\(' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | sort)
# Each version node of the map, and each of its functions in that node.
want_exported=$(awk '/^HGCLOCK_[0-9.]+ \{/ { node = $1; print node }
	node && /^[[:space:]]*hgclock_[a-z_0-9]+;/ { f = $1; sub(/;/, "", f); print f "@@" node }
	/^}/ { node = "" }' "$map" | sort)
if [ "$(wc -l <<<"$from_header")" -lt 5 ]; then
	not_ok api_lists "found only '$(echo $from_header)' declared in $hdr"
elif ! grep -qx "HGCLOCK_$major.$minor" <<<"$want_exported"; then
	not_ok api_lists "the map has no node HGCLOCK_$major.$minor for the header's version"
elif [ "$from_header" != "$from_map" ] || [ "$from_header" != "$from_page" ]; then
	not_ok api_lists "header: $(echo $from_header); map: $(echo $from_map); man page: $(echo $from_page)"
else
	ok api_lists
fi
if [ "$exported" = "$want_exported" ]; then
	ok exports_only_api
else
	not_ok exports_only_api "nm -D --defined-only: $(echo $exported); want $(echo $want_exported)"
fi
# No internal function or data leaks under another name (hidden visibility).
leaks=$(nm -D --defined-only "$lib" | awk '$2 != "T" && $2 != "A" { print $3 }')
check no_exported_data "exports non-function symbols: $leaks" [ -z "$leaks" ]

# ---- the header alone, C and C++ ----------------------------------------------
inc=$dest/usr/include
check header_c89 "<hgclock/hgclock.h> does not compile alone as C89 -pedantic" \
	sh -c "echo '#include <hgclock/hgclock.h>' | $cc -std=c89 -pedantic -Wall -Wextra -Werror -I'$inc' -x c -fsyntax-only -"
if command -v c++ >/dev/null; then
	check header_cxx "<hgclock/hgclock.h> does not compile alone as C++11" \
		sh -c "printf '#include <hgclock/hgclock.h>\nint main() { struct hgclock_clock *c = hgclock_clock_open(nullptr, 0); hgclock_clock_close(c); return 0; }\n' | c++ -std=c++11 -pedantic -Wall -Wextra -Werror -I'$inc' -x c++ -fsyntax-only -"
else
	skip header_cxx "no c++ compiler"
fi

# ---- pkg-config and the example program ----------------------------------------
export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$dest/usr/lib/pkgconfig PKG_CONFIG_PATH=
flags=$(pkg-config --cflags --libs hgclock 2>"$tmp/pc.err")
if [ $? -ne 0 ]; then
	not_ok pkg_config "pkg-config --cflags --libs hgclock: $(cat "$tmp/pc.err")"
elif ! grep -qF -- "-I$dest/usr/include" <<<"$flags" || ! grep -qF -- "-L$dest/usr/lib" <<<"$flags" ||
	! grep -qw -- "-lhgclock" <<<"$flags"; then
	not_ok pkg_config "flags '$flags' do not point into $dest"
elif [ "$(pkg-config --modversion hgclock)" != "$version" ]; then
	not_ok pkg_config "modversion $(pkg-config --modversion hgclock), header $version"
else
	ok pkg_config
fi
# shellcheck disable=SC2086 # flags: words
if $cc -std=gnu11 -Wall -Wextra -Werror -o "$tmp/hgclock-clock" "$example" $flags 2>"$tmp/cc.err"; then
	ok example_builds
else
	not_ok example_builds "$(head -n 5 "$tmp/cc.err" | tr '\n' ' ')"
fi
ex=$tmp/hgclock-clock
export LD_LIBRARY_PATH=$dest/usr/lib
if [ -x "$ex" ]; then
	needed=$(readelf -d "$ex" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
	resolved=$(ldd "$ex" 2>/dev/null | awk '$1 == "libhgclock.so.'"$major"'" { print $3 }')
	uses=$(nm -D --undefined-only "$ex" | awk '{ print $2 }' | grep hgclock | sort)
	want_uses=$(grep -oE 'hgclock_[a-z_]+\(' "$example" | tr -d '(' | sort -u | sed 's/$/@HGCLOCK_1.0/')
	if ! grep -qx "libhgclock.so.$major" <<<"$needed"; then
		not_ok example_links_api "NEEDED: $(echo $needed)"
	elif [ "$resolved" != "$lib" ] && [ "$(readlink -f "$resolved")" != "$lib" ]; then
		not_ok example_links_api "libhgclock.so.$major resolves to '$resolved', not the DESTDIR's"
	elif [ "$uses" != "$want_uses" ]; then
		not_ok example_links_api "uses $(echo $uses), want $(echo $want_uses)"
	else
		ok example_links_api
	fi
else
	not_ok example_links_api "no example binary"
fi
# The events example (hgclock_events_open(3)): builds the same way, binds
# the events' functions to HGCLOCK_1.1 and the clock's to HGCLOCK_1.0.
example_ev=$top/tools/examples/hgclock-events.c
# shellcheck disable=SC2086 # flags: words
if $cc -std=gnu11 -pthread -Wall -Wextra -Werror -o "$tmp/hgclock-events" "$example_ev" $flags \
	2>"$tmp/cc-ev.err"; then
	uses=$(nm -D --undefined-only "$tmp/hgclock-events" | awk '{ print $2 }' | grep hgclock_ | sort)
	want_uses=$(grep -oE 'hgclock_[a-z_]+\(' "$example_ev" | tr -d '(' | sort -u |
		sed -E '/^hgclock_(event|events_[a-z]+)$/ s/$/@HGCLOCK_1.1/; /@/! s/$/@HGCLOCK_1.0/' | sort)
	if [ "$uses" = "$want_uses" ]; then
		ok events_example_versions
	else
		not_ok events_example_versions "uses $(echo $uses), want $(echo $want_uses)"
	fi
	# Without a device it says so, and creates no file.
	LD_LIBRARY_PATH=$dest/usr/lib timeout 30 "$tmp/hgclock-events" "$tmp/ev.hgev" \
		>"$tmp/ev.out" 2>&1
	rc=$?
	if [ -e /dev/hgclock-clock ] || [ -e /dev/hgclock ]; then
		skip events_example_no_device "/dev/hgclock exists on this machine"
	elif [ $rc -eq 1 ] && grep -q '^hgclock-events: /dev/hgclock does not exist: load the module' \
		"$tmp/ev.out" && [ ! -e "$tmp/ev.hgev" ]; then
		ok events_example_no_device
	else
		not_ok events_example_no_device "exit $rc: $(head -c 300 "$tmp/ev.out")"
	fi
else
	not_ok events_example_versions "$(head -n 5 "$tmp/cc-ev.err" | tr '\n' ' ')"
	not_ok events_example_no_device "no example binary"
fi

# The control: the tool's internals are in the library but not reachable.
cat >"$tmp/internal.c" <<'C'
#include <stddef.h>
int hgclock_open(const char *path);
int main(void) { return hgclock_open(NULL) < 0; }
C
# shellcheck disable=SC2086
if $cc -o "$tmp/internal" "$tmp/internal.c" $flags 2>"$tmp/internal.err"; then
	not_ok internals_hidden "a program calling hgclock_open() (internal) linked"
elif grep -q "undefined reference to .hgclock_open" "$tmp/internal.err"; then
	ok internals_hidden
else
	not_ok internals_hidden "did not fail for the missing symbol: $(head -n 3 "$tmp/internal.err" | tr '\n' ' ')"
fi

# ---- without a device: the documented errno and advice ----------------------------
# run_ex ARGS...: the example, $rc and $err afterwards.
run_ex() {
	timeout 30 "$ex" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
	rc=$?
	err=$(cat "$tmp/err.txt")
}
# From hgclock_clock_strerror(3): ENOENT says to load the module.
advice='ENOENT \(2\): /dev/hgclock does not exist: load the module first'
if [ -x "$ex" ]; then
	run_ex "$tmp/no-such-device"
	if [ $rc -eq 1 ] && grep -Eq "^hgclock-clock: open $tmp/no-such-device: $advice" <<<"$err"; then
		ok no_device_enoent
	else
		not_ok no_device_enoent "exit $rc: $err"
	fi
	if [ -e /dev/hgclock-clock ] || [ -e /dev/hgclock ]; then
		skip default_device_enoent "/dev/hgclock exists on this machine"
	else
		# NULL: /dev/hgclock-clock, then /dev/hgclock; neither is there.
		run_ex
		if [ $rc -eq 1 ] && grep -Eq "^hgclock-clock: open /dev/hgclock-clock: $advice" <<<"$err"; then
			ok default_device_enoent
		else
			not_ok default_device_enoent "exit $rc: $err"
		fi
	fi
	# Not the hgclock device: GET_INFO is refused, the open fails.
	run_ex /dev/null
	if [ $rc -eq 1 ] && grep -Eq '^hgclock-clock: open /dev/null: [A-Za-z]+ \(25\): ' <<<"$err"; then
		ok not_hgclock_device
	else
		not_ok not_hgclock_device "exit $rc: $err"
	fi
	# A device this user may not read: EACCES, with what to do about it.
	: >"$tmp/unreadable"
	chmod 000 "$tmp/unreadable"
	chmod 755 "$tmp"
	if [ "$(id -u)" -ne 0 ]; then
		run_ex "$tmp/unreadable"
	elif command -v setpriv >/dev/null && cp "$ex" "$tmp/ex-nobody" &&
		chmod 755 "$tmp/ex-nobody" "$dest" "$dest/usr" "$dest/usr/lib"; then
		setpriv --reuid=65534 --regid=65534 --clear-groups \
			env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" timeout 30 "$tmp/ex-nobody" \
			"$tmp/unreadable" >"$tmp/out.txt" 2>"$tmp/err.txt"
		rc=$?
		err=$(cat "$tmp/err.txt")
	else
		rc=skip
	fi
	if [ "$rc" = skip ]; then
		skip no_access_eacces "root, and no setpriv to drop it"
	elif [ "$rc" -eq 1 ] && grep -Eq '^hgclock-clock: open [^ ]+: EACCES \(13\): /dev/hgclock is not accessible: run as root or as a member of the group' <<<"$err"; then
		ok no_access_eacces
	else
		not_ok no_access_eacces "exit $rc: $err"
	fi
else
	not_ok no_device_enoent "no example binary"
fi

# ---- the documentation shows this very example ------------------------------------
doc=$top/Documentation/library.rst
block=$(awk -v f="$(basename "$example")" '
	/^\.\. code-block:: c$/ { inb = 1; n = 0; next }
	inb && /^    / { sub(/^    /, ""); buf = buf $0 "\n"; next }
	inb && /^$/ { if (buf != "") buf = buf "\n"; next }
	inb { if (buf ~ f) { printf "%s", buf; done = 1; exit } inb = 0; buf = "" }
	END { if (!done && inb && buf ~ f) printf "%s", buf }' "$doc" 2>/dev/null | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}')
if [ -z "$block" ]; then
	not_ok doc_example "no code-block with $(basename "$example") in $doc"
elif [ "$block" != "$(cat "$example")" ]; then
	not_ok doc_example "$doc's code block differs from $example: $(diff <(echo "$block") "$example" | head -n 4 | tr '\n' ' ')"
else
	ok doc_example
fi

# ---- uninstall ----------------------------------------------------------------
if ! tree_make uninstall-lib >"$tmp/uninstall.log" 2>&1; then
	not_ok uninstall "make uninstall-lib failed: $(tail -n 5 "$tmp/uninstall.log" | tr '\n' ' ')"
else
	left=$(cd "$dest" && find . ! -type d -printf '%P\n')
	check uninstall "left after uninstall-lib: $left" [ -z "$left" ]
fi

echo "1..$n"
[ "$failed" -eq 0 ]
