# SPDX-License-Identifier: GPL-2.0
#
# hgclock top-level Makefile.
#
#   make            module (for KDIR), user tool, selftests
#   make check      install what is missing, build, run every test (VMs)
#   make check-debug the kselftests on a KASAN/lockdep/kmemleak/UBSAN kernel
#   make demo       nested KVM host and guest, traces on both, hgclock merge
#   make bench      benchmarks, one "BENCH name value unit" line each
#
# KDIR defaults to the running kernel's build tree when it exists, else the
# newest installed Debian linux-headers-*; `make KDIR=...` overrides.

KDIR ?= $(shell tools/kdir.sh)
BUILD ?= build
CC ?= gcc

USER_CFLAGS := -O2 -g -std=gnu11 -Wall -Wextra -Werror -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -D_GNU_SOURCE \
	-Iinclude/uapi -Iuser $(EXTRA_CFLAGS)
# hgclock merge reads trace.dat with libtracecmd and libtraceevent.
TRACECMD_CFLAGS := $(shell pkg-config --cflags libtracecmd libtraceevent 2>/dev/null || \
	echo -I/usr/include/trace-cmd -I/usr/include/traceevent -I/usr/include/tracefs)
TRACECMD_LIBS := $(shell pkg-config --libs libtracecmd libtraceevent 2>/dev/null || \
	echo -ltracecmd -ltracefs -ltraceevent)
USER_CFLAGS += $(TRACECMD_CFLAGS)
USER_LDFLAGS := $(EXTRA_LDFLAGS) $(TRACECMD_LIBS) -lpthread -lm

LIB_SRCS := user/libhgclock.c user/ring.c user/uclock.c user/corr.c user/proto.c \
	user/sync.c
TOOL_SRCS := user/hgclock.c user/util.c user/json.c \
	user/cmd_info.c user/cmd_now.c user/cmd_snapshots.c user/cmd_vcpus.c user/cmd_records.c user/recprint.c \
	user/cmd_record.c user/cmd_dump.c user/cmd_agent.c user/cmd_convert.c user/cmd_mark.c \
	user/cmd_merge.c user/merge.c user/merge_out.c user/merge_par.c user/cmd_plot.c
LIB := $(BUILD)/user/libhgclock.a
TOOL := $(BUILD)/user/hgclock

KSFT_DIR := $(BUILD)/ksft
KSFT_HDR := $(KSFT_DIR)/kselftest_harness.h
SELFTEST_CFLAGS := -O2 -g -std=gnu11 -Wall -Werror -D_GNU_SOURCE -Iinclude/uapi -Iuser -I$(KSFT_DIR)
TRACEFS_CFLAGS := $(shell pkg-config --cflags libtracefs 2>/dev/null)
TRACEFS_LIBS := $(shell pkg-config --libs libtracefs 2>/dev/null || echo -ltracefs -ltraceevent)

SELFTESTS := $(BUILD)/selftests/hgclock_test $(BUILD)/selftests/ring_test \
	$(BUILD)/selftests/track_test $(BUILD)/selftests/perm_test \
	$(BUILD)/selftests/leak_test $(BUILD)/selftests/fuzz_ioctl_test \
	$(BUILD)/selftests/stress_test
UNIT_TESTS := $(BUILD)/unit/test_json $(BUILD)/unit/test_lib $(BUILD)/unit/test_corr \
	$(BUILD)/unit/test_sync $(BUILD)/unit/test_merge
BENCHES := $(BUILD)/bench/bench_read_clock $(BUILD)/bench/bench_ring \
	$(BUILD)/bench/bench_pingpong

NESTED_HELPERS := $(BUILD)/selftests/tsc_adjust

.PHONY: all module user selftests unit check demo demo-module bench clean headers-check fuzz

all: module user selftests

module:
	tools/build-module.sh "$(KDIR)" "$(BUILD)/module"

user: $(TOOL) $(LIB)

$(BUILD)/user/%.o: user/%.c include/uapi/linux/hgclock.h $(wildcard user/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -c -o $@ $<

$(LIB): $(LIB_SRCS:user/%.c=$(BUILD)/user/%.o)
	$(AR) rcs $@ $^

$(TOOL): $(TOOL_SRCS:user/%.c=$(BUILD)/user/%.o) $(LIB)
	$(CC) $(USER_CFLAGS) -o $@ $^ $(USER_LDFLAGS)

# The kselftest harness comes from Debian's linux-source tarball.
$(KSFT_HDR):
	tools/ksft-headers.sh "$(KSFT_DIR)"

selftests: $(SELFTESTS) $(UNIT_TESTS) $(BENCHES) $(NESTED_HELPERS)

# Guest-side helpers of the nested tests: static, the guest has no libc.
$(BUILD)/selftests/tsc_adjust: selftests/nested/tsc_adjust.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -static -o $@ $<

$(BUILD)/selftests/%: selftests/%.c selftests/test_util.h $(KSFT_HDR) $(LIB) include/uapi/linux/hgclock.h
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) $(TRACEFS_CFLAGS) -o $@ $< $(LIB) $(TRACEFS_LIBS) -lpthread -lm

$(BUILD)/unit/test_json: selftests/unit/test_json.c user/json.c $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_json.c user/json.c

$(BUILD)/unit/test_lib: selftests/unit/test_lib.c $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_lib.c user/util.c $(LIB) -lm

$(BUILD)/unit/test_sync: selftests/unit/test_sync.c $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_sync.c $(LIB) -lm

# Real recordings (selftests/data/capture.sh), unpacked next to the test.
MERGE_DATA := $(BUILD)/unit/data/merge.hgc $(BUILD)/unit/data/host.dat \
	$(BUILD)/unit/data/guest.dat
$(BUILD)/unit/data/%: selftests/data/%.xz
	@mkdir -p $(dir $@)
	xz -dc $< >$@.tmp && mv $@.tmp $@

$(BUILD)/unit/test_merge: selftests/unit/test_merge.c user/merge.c user/merge_out.c user/merge_par.c \
		user/json.c user/merge.h $(LIB) $(KSFT_HDR) $(MERGE_DATA)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) $(TRACECMD_CFLAGS) -o $@ selftests/unit/test_merge.c user/merge.c \
		user/merge_out.c user/merge_par.c user/json.c $(LIB) $(TRACECMD_LIBS) -lpthread -lm

$(BUILD)/unit/test_corr: selftests/unit/test_corr.c user/corr.c user/corr.h $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_corr.c user/corr.c

# The correlation file reader under libFuzzer, ASan and UBSan (clang).
FUZZ_TIME ?= 20
$(BUILD)/fuzz/fuzz_corr: selftests/fuzz/fuzz_corr.c user/corr.c user/corr.h
	@mkdir -p $(dir $@)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-Iinclude/uapi -Iuser -o $@ selftests/fuzz/fuzz_corr.c user/corr.c

fuzz: $(BUILD)/fuzz/fuzz_corr $(BUILD)/unit/test_corr
	tools/fuzz.sh $(BUILD) $(FUZZ_TIME)

$(BUILD)/bench/%: tools/bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< $(LIB) -lm

unit: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do $$t || exit 1; done

# The UAPI header must compile alone, as C90.
headers-check:
	echo '#include <linux/hgclock.h>' | $(CC) -std=c90 -pedantic -Wall -Werror \
		-Iinclude/uapi -x c -fsyntax-only -

check:
	tools/check.sh

# A debug kernel built once from linux-source-6.1 (tools/debug-kernel.sh).
.PHONY: check-debug
check-debug:
	BUILD=$(BUILD) tools/check-debug.sh

demo:
	tools/demo.sh

demo-module:
	tools/demo-module.sh

bench:
	tools/bench/run.sh

clean:
	rm -rf $(BUILD)
	find module -name '*.o' -o -name '.*.cmd' | xargs rm -f

# ---- Installing (Documentation/install.rst) -------------------------------
#
#   make install [DESTDIR=...] [PREFIX=/usr/local] [KDIR=...]
#   make uninstall, make man, make dkms-src, make dkms-install
#
# The version lives in one place, HGCLOCK_VERSION in user/hgclock.c; the
# man pages and dkms.conf read it from there.  The module goes to the
# kernel of KDIR: KVER is that tree's release, from its Debian directory
# name (/lib/modules/<release>/build links to one), else from Kbuild.
VERSION := $(shell sed -n 's/^.define HGCLOCK_VERSION "\(.*\)"$$/\1/p' user/hgclock.c)
KDIR_REAL = $(realpath $(KDIR))
ifeq ($(origin KVER),undefined)
KVER := $(shell d='$(KDIR_REAL)'; case "$$d" in \
	(*/linux-headers-*) basename "$$d" | sed 's/^linux-headers-//' ;; \
	(?*) $(MAKE) -s -C "$$d" kernelrelease 2>/dev/null ;; esac)
endif
MODULE_KO = $(BUILD)/module/$(KVER)/hgclock.ko
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
UDEVRULESDIR ?= /etc/udev/rules.d
MAN_PAGES := $(patsubst Documentation/man/%.rst,$(BUILD)/man/%.1,$(wildcard Documentation/man/*.rst))

.PHONY: install uninstall man dkms-src dkms-install dkms-uninstall kver-check

kver-check:
	@test -n "$(KVER)" || { echo "make: no kernel release for KDIR='$(KDIR)': install linux-headers (tools/deps.sh) or pass KDIR=" >&2; exit 1; }

$(MODULE_KO): Kbuild $(wildcard module/*.c module/*.h) include/uapi/linux/hgclock.h | kver-check
	tools/build-module.sh "$(KDIR_REAL)" "$(BUILD)/module"

man: $(MAN_PAGES)

$(BUILD)/man/%.1: Documentation/man/%.rst user/hgclock.c
	@mkdir -p $(dir $@)
	sed '/^:Manual section:/a :Version: hgclock $(VERSION)' $< >$(@:.1=.rst)
	rst2man --halt=warning --input-encoding=utf-8 $(@:.1=.rst) $@.tmp
	mv $@.tmp $@

install: kver-check $(MODULE_KO) $(TOOL) man
	install -D -m 0644 $(MODULE_KO) $(DESTDIR)/lib/modules/$(KVER)/updates/hgclock.ko
	install -D -m 0755 $(TOOL) $(DESTDIR)$(BINDIR)/hgclock
	install -D -m 0644 tools/udev/60-hgclock.rules $(DESTDIR)$(UDEVRULESDIR)/60-hgclock.rules
	install -d -m 0755 $(DESTDIR)$(MANDIR)/man1
	install -m 0644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	@if [ -z "$(DESTDIR)" ]; then \
		set -e; \
		getent group hgclock >/dev/null || groupadd --system hgclock; \
		depmod -a $(KVER); \
		if command -v udevadm >/dev/null; then \
			udevadm control --reload || true; \
			udevadm trigger --subsystem-match=misc --sysname-match=hgclock || true; \
		fi; \
	fi

uninstall: kver-check
	rm -f $(DESTDIR)/lib/modules/$(KVER)/updates/hgclock.ko \
		$(DESTDIR)$(BINDIR)/hgclock \
		$(DESTDIR)$(UDEVRULESDIR)/60-hgclock.rules \
		$(DESTDIR)$(MANDIR)/man1/hgclock.1 $(DESTDIR)$(MANDIR)/man1/hgclock-*.1
	@if [ -z "$(DESTDIR)" ]; then set -e; depmod -a $(KVER); fi

# DKMS (dkms.conf): the module's sources in /usr/src/hgclock-<version>,
# then built and installed for every kernel with headers.
DKMS_SRC = $(DESTDIR)/usr/src/hgclock-$(VERSION)

dkms-src:
	@test -n "$(VERSION)" || { echo "make: no HGCLOCK_VERSION in user/hgclock.c" >&2; exit 1; }
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)/module $(DKMS_SRC)/include/uapi/linux $(DKMS_SRC)/user
	install -m 0644 dkms.conf Kbuild $(DKMS_SRC)/
	install -m 0644 module/*.c module/*.h $(DKMS_SRC)/module/
	install -m 0644 include/uapi/linux/hgclock.h $(DKMS_SRC)/include/uapi/linux/
	install -m 0644 user/hgclock.c $(DKMS_SRC)/user/

dkms-install: dkms-src
	@test -z "$(DESTDIR)" || { echo "make: dkms-install installs into the system: no DESTDIR" >&2; exit 1; }
	dkms add hgclock/$(VERSION)
	kernels=$$(for b in /lib/modules/*/build; do [ -f "$$b/Makefile" ] && basename "$${b%/build}"; done); \
	test -n "$$kernels" || { echo "make: no kernel headers in /lib/modules/*/build" >&2; exit 1; }; \
	dkms install hgclock/$(VERSION) $$(printf -- '-k %s ' $$kernels)

dkms-uninstall:
	dkms remove hgclock/$(VERSION) --all
	rm -rf $(DKMS_SRC)

# ---- User space under AddressSanitizer and UBSan ---------------------------
#
# The tool, libhgclock and the unit tests, built with SAN_CC (default CC)
# into SAN_BUILD; tools/asan-check.sh runs them (make asan-check).
SAN_BUILD ?= $(BUILD)/asan
SAN_CC ?= $(CC)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

.PHONY: asan asan-check

asan: $(KSFT_HDR)
	$(MAKE) BUILD=$(SAN_BUILD) CC=$(SAN_CC) KSFT_DIR=$(KSFT_DIR) \
		EXTRA_CFLAGS="$(EXTRA_CFLAGS) $(SAN_FLAGS)" \
		EXTRA_LDFLAGS="$(EXTRA_LDFLAGS) $(SAN_FLAGS)" \
		SELFTEST_CFLAGS="$(SELFTEST_CFLAGS) $(SAN_FLAGS)" \
		$(SAN_BUILD)/user/hgclock $(patsubst $(BUILD)/%,$(SAN_BUILD)/%,$(UNIT_TESTS))

asan-check: asan $(BUILD)/unit/test_corr
	tools/asan-check.sh $(BUILD) $(SAN_BUILD)
