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

# The user side's rooms (Documentation/design.rst): commands, the recorder, the
# merge engine, the helpers they share; their headers by name from any room.
USER_ROOMS_I := -Iuser/cmd -Iuser/record -Iuser/merge -Iuser/common
USER_CFLAGS := -O2 -g -std=gnu11 -Wall -Wextra -Werror -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -D_GNU_SOURCE \
	-Iinclude/uapi -Iuser $(USER_ROOMS_I) -Iuser/lib -Iuser/lib/include $(EXTRA_CFLAGS)
# hgclock merge reads trace.dat with libtracecmd and libtraceevent.
TRACECMD_CFLAGS := $(shell pkg-config --cflags libtracecmd libtraceevent 2>/dev/null || \
	echo -I/usr/include/trace-cmd -I/usr/include/traceevent -I/usr/include/tracefs)
TRACECMD_LIBS := $(shell pkg-config --libs libtracecmd libtraceevent 2>/dev/null || \
	echo -ltracecmd -ltracefs -ltraceevent)
USER_CFLAGS += $(TRACECMD_CFLAGS)
# Compressed sections of the correlation file (file-format.rst) with libzstd
# (libzstd-dev); without it the library neither writes nor reads them.
ZSTD_CFLAGS := $(shell pkg-config --cflags libzstd 2>/dev/null || echo -DHGCLOCK_NO_ZSTD)
ZSTD_LIBS := $(shell pkg-config --libs libzstd 2>/dev/null)
USER_CFLAGS += $(ZSTD_CFLAGS)
# merge --perfetto: Perfetto's protobuf trace through protobuf-c (libprotobuf-c-dev),
# the C code generated from user/merge/perfetto_trace.proto by protoc-c
# (protobuf-c-compiler) into $(BUILD)/gen.
PROTOBUF_C_CFLAGS := $(shell pkg-config --cflags libprotobuf-c 2>/dev/null)
PROTOBUF_C_LIBS := $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
PB_GEN := $(BUILD)/gen/perfetto_trace.pb-c.c $(BUILD)/gen/perfetto_trace.pb-c.h
USER_LDFLAGS := $(EXTRA_LDFLAGS) $(TRACECMD_LIBS) $(ZSTD_LIBS) $(PROTOBUF_C_LIBS) -lpthread -lm

# libhgclock (user/lib/), linked statically into the tool; the command's files
# are in user/.  user/lib/clock.c is the application API of libhgclock.so (below).
LIB_SRCS := user/lib/libhgclock.c user/lib/ring.c user/lib/uclock.c user/lib/corr.c \
	user/lib/corr_check.c user/lib/corr_rec.c user/lib/proto.c user/lib/sync.c user/lib/clock.c
# The guest-to-host mapping's other files, by method (Documentation/sync.rst)
LIB_SRCS += user/lib/sync_core.c user/lib/sync_load.c user/lib/sync_vcpu.c user/lib/sync_kvm.c \
	user/lib/sync_fit.c user/lib/sync_bound.c
# Exit pairing by trace_marker for guests without the module (pure part; guest binary too)
LIB_SRCS += user/lib/markpair.c user/lib/appev.c user/lib/events.c
LIB_HDRS := $(wildcard user/lib/*.h) user/lib/include/hgclock/hgclock.h
TOOL_SRCS := user/hgclock.c user/common/util.c user/common/output.c user/common/json.c \
	user/cmd/cmd_info.c user/cmd/cmd_now.c user/cmd/cmd_snapshots.c user/cmd/cmd_vcpus.c user/cmd/cmd_records.c user/common/recprint.c \
	user/cmd/cmd_record.c user/cmd/cmd_recover.c user/cmd/cmd_dump.c user/cmd/cmd_agent.c user/cmd/cmd_convert.c user/cmd/cmd_mark.c \
	user/cmd/cmd_merge.c user/merge/claims.c user/merge/merge.c user/merge/merge_in.c user/merge/merge_out.c user/merge/merge_par.c user/cmd/cmd_plot.c
# Input parsing and plot axes, also unit-tested (test_lib)
TOOL_SRCS += user/common/vcpu_lines.c user/common/plot_axis.c
# The recorder's parts (user/record/record.h), under cmd_record.c
TOOL_SRCS += user/record/writer.c user/record/guests.c user/record/probe.c user/record/session.c \
	user/record/disrupt.c user/record/signals.c user/record/merge_end.c
# Finding a guest's VM (record --guest domain:NAME), unit-tested (test_vmfind)
TOOL_SRCS += user/record/vmfind.c user/record/vmfind_args.c user/merge/perf_in.c user/merge/merge_report.c user/merge/merge_filter.c user/merge/merge_dat.c
TOOL_SRCS += user/merge/merge_pftrace.c
# pairmark (guest side) and reading its markers from a guest trace.dat (host side)
TOOL_SRCS += user/cmd/cmd_pairmark.c user/merge/markpair_trace.c
# trace.dat handles shared by a command's readers (merge: checks, pairing, passes)
TOOL_SRCS += user/merge/trace_pool.c user/merge/ksyms.c user/merge/sched_names.c
# Where a guest's time went (Documentation/analyze.rst), unit-tested (test_analyze)
TOOL_SRCS += user/merge/analyze.c user/merge/analyze_names.c user/merge/analyze_in.c user/merge/analyze_req.c \
	user/merge/analyze_svg.c
LIB := $(BUILD)/user/libhgclock.a
TOOL := $(BUILD)/user/hgclock
# The shared library for applications (Documentation/library.rst): the
# version from the public header, the one place it is defined.
SO_HDR := user/lib/include/hgclock/hgclock.h
so_version = $(shell sed -n 's/^.define HGCLOCK_LIB_VERSION_$(1)[[:space:]]*\([0-9]*\)$$/\1/p' $(SO_HDR))
SO_MAJOR := $(call so_version,MAJOR)
SO_VERSION := $(SO_MAJOR).$(call so_version,MINOR).$(call so_version,PATCH)
SO_NAME := libhgclock.so.$(SO_MAJOR)
SO_REAL := $(BUILD)/user/libhgclock.so.$(SO_VERSION)
SO_LINKS := $(BUILD)/user/$(SO_NAME) $(BUILD)/user/libhgclock.so
SO_SRCS := user/lib/clock.c user/lib/libhgclock.c user/lib/ring.c user/lib/uclock.c \
	user/lib/events.c user/lib/appev.c
# libhgclock's pages (section 3): one page per file in Documentation/man/man3,
# and for each other function of a page a one-line .so page pointing to it.
MAN3_PAGES := $(patsubst Documentation/man/man3/%.rst,$(BUILD)/man/man3/%.3,\
	$(wildcard Documentation/man/man3/*.rst))
MAN3_LINKS := $(patsubst %,$(BUILD)/man/man3/%.3,hgclock_clock_read hgclock_clock_perf_ns hgclock_clock_close \
	hgclock_clock_strerror hgclock_lib_version)
MAN3_EV_LINKS := $(patsubst %,$(BUILD)/man/man3/%.3,hgclock_event hgclock_events_flush \
	hgclock_events_close)
MAN3 := $(MAN3_PAGES) $(MAN3_LINKS) $(MAN3_EV_LINKS)
# hgclock-guest: the guest-side commands alone (user/guest_main.c), without merge and
# so without libtracecmd; the hgclock-guest package (Documentation/install.rst).
GUEST_SRCS := user/guest_main.c user/common/util.c user/common/output.c user/common/json.c \
	user/cmd/cmd_info.c user/cmd/cmd_now.c user/cmd/cmd_agent.c user/cmd/cmd_mark.c user/cmd/cmd_pairmark.c
GUEST := $(BUILD)/user/hgclock-guest

KSFT_DIR := $(BUILD)/ksft
KSFT_HDR := $(KSFT_DIR)/kselftest_harness.h
SELFTEST_CFLAGS := -O2 -g -std=gnu11 -Wall -Werror -D_GNU_SOURCE -Iinclude/uapi -Iuser $(USER_ROOMS_I) -Iuser/lib \
	-Iuser/lib/include -I$(KSFT_DIR) \
	$(ZSTD_CFLAGS)
TRACEFS_CFLAGS := $(shell pkg-config --cflags libtracefs 2>/dev/null)
TRACEFS_LIBS := $(shell pkg-config --libs libtracefs 2>/dev/null || echo -ltracefs -ltraceevent)

SELFTESTS := $(BUILD)/selftests/hgclock_test $(BUILD)/selftests/ring_test \
	$(BUILD)/selftests/track_test $(BUILD)/selftests/perm_test \
	$(BUILD)/selftests/leak_test $(BUILD)/selftests/fuzz_ioctl_test \
	$(BUILD)/selftests/stress_test $(BUILD)/selftests/abi_test \
	$(BUILD)/selftests/unload_test $(BUILD)/selftests/kvm_track_test
# The zero-syscall clock by each method against READ_CLOCK (library.rst)
SELFTESTS += $(BUILD)/selftests/uclock_test
UNIT_TESTS := $(BUILD)/unit/test_json $(BUILD)/unit/test_lib $(BUILD)/unit/test_corr \
	$(BUILD)/unit/test_sync $(BUILD)/unit/test_merge $(BUILD)/unit/test_cli \
	$(BUILD)/unit/test_cli_outputs \
	$(BUILD)/unit/test_identity $(BUILD)/unit/test_vmfind $(BUILD)/unit/test_markpair \
	$(BUILD)/unit/test_manyguests $(BUILD)/unit/test_libso $(BUILD)/unit/test_kernelshark \
	$(BUILD)/unit/test_disrupt $(BUILD)/unit/test_uclock
UNIT_TESTS += $(BUILD)/unit/test_analyze $(BUILD)/unit/test_hostsink
# Application events: many threads, per-CPU buffers, flush and errors (library.rst)
UNIT_TESTS += $(BUILD)/unit/test_events
# One parse of a trace.dat's kallsyms for all handles (user/merge/ksyms.c)
UNIT_TESTS += $(BUILD)/unit/test_ksyms
BENCHES := $(BUILD)/bench/bench_read_clock $(BUILD)/bench/bench_ring \
	$(BUILD)/bench/bench_pingpong $(BUILD)/bench/bench_compress

# Natively, no module: the zero-syscall clock by each method against the vDSO (bench.rst)
BENCHES += $(BUILD)/bench/bench_native_clock
# Natively: hgclock_event() against trace_marker and an LTTng-UST tracepoint
# (bench.rst); the LTTng part only with liblttng-ust-dev (tools/deps.sh)
BENCHES += $(BUILD)/bench/bench_native_event
# Natively: merge --analyze's engine on a small and a large host (bench.rst)
BENCHES += $(BUILD)/bench/bench_analyze
LTTNG_UST_CFLAGS := $(shell pkg-config --exists lttng-ust 2>/dev/null && \
	echo -DHGCLOCK_BENCH_LTTNG $$(pkg-config --cflags lttng-ust))
LTTNG_UST_LIBS := $(shell pkg-config --libs lttng-ust 2>/dev/null)

NESTED_HELPERS := $(BUILD)/selftests/tsc_adjust $(BUILD)/selftests/cpuid_flood

.PHONY: all module user selftests unit check demo demo-module bench clean headers-check fuzz layer-check

all: module user selftests

module:
	+tools/build-module.sh "$(KDIR)" "$(BUILD)/module"

user: $(TOOL) $(LIB) $(GUEST) $(SO_LINKS)

$(BUILD)/user/%.o: user/%.c include/uapi/linux/hgclock.h $(wildcard user/*.h user/*/*.h) $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -c -o $@ $<

$(LIB): $(LIB_SRCS:user/%.c=$(BUILD)/user/%.o)
	$(AR) rcs $@ $^

# user/merge/ksyms.c defines tep_parse_kallsyms() for libtracecmd to call
# (the link would export it anyway, as a library references it: said here).
KSYMS_LDFLAGS := -Wl,--export-dynamic-symbol=tep_parse_kallsyms
$(TOOL): $(TOOL_SRCS:user/%.c=$(BUILD)/user/%.o) $(BUILD)/gen/perfetto_trace.pb-c.o $(LIB)
	$(CC) $(USER_CFLAGS) -o $@ $^ $(USER_LDFLAGS) $(KSYMS_LDFLAGS)

# Both files in one protoc-c run; the generated C is compiled without
# -Wextra's and our prototypes' warnings (its style, not ours).
$(BUILD)/gen/perfetto_trace.pb-c.h: $(BUILD)/gen/perfetto_trace.pb-c.c
$(BUILD)/gen/perfetto_trace.pb-c.c: user/merge/perfetto_trace.proto
	@mkdir -p $(dir $@)
	protoc-c --proto_path=user/merge --c_out=$(BUILD)/gen $<

$(BUILD)/gen/perfetto_trace.pb-c.o: $(BUILD)/gen/perfetto_trace.pb-c.c
	$(CC) -O2 -g -Wall -Werror $(PROTOBUF_C_CFLAGS) -I$(BUILD)/gen -c -o $@ $<

$(BUILD)/user/merge/merge_pftrace.o: user/merge/merge_pftrace.c $(BUILD)/gen/perfetto_trace.pb-c.h \
		include/uapi/linux/hgclock.h $(wildcard user/*.h user/*/*.h) $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) $(PROTOBUF_C_CFLAGS) -I$(BUILD)/gen -c -o $@ $<

# libhgclock.so: the application API of <hgclock/hgclock.h> (user/lib/clock.c)
# and the parts of the library it uses, compiled again as PIC with hidden
# visibility; user/lib/libhgclock.map exports the API's functions alone, in
# version node HGCLOCK_1.0 (Documentation/library.rst).  The version is the
# header's HGCLOCK_LIB_VERSION_*: real name libhgclock.so.MAJOR.MINOR.PATCH,
# SONAME libhgclock.so.MAJOR, and libhgclock.so for the linker.
$(BUILD)/user/pic/%.o: user/%.c include/uapi/linux/hgclock.h $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(SO_REAL): $(SO_SRCS:user/%.c=$(BUILD)/user/pic/%.o) user/lib/libhgclock.map
	$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=user/lib/libhgclock.map \
		-Wl,-z,defs -o $@ $(filter %.o,$^) $(EXTRA_LDFLAGS)

$(BUILD)/user/$(SO_NAME): $(SO_REAL)
	ln -sfn $(notdir $<) $@

$(BUILD)/user/libhgclock.so: $(BUILD)/user/$(SO_NAME)
	ln -sfn $(notdir $<) $@

.PHONY: lib
lib: $(SO_LINKS)

# Linked without TRACECMD_LIBS: tools/deb-check.sh checks it needs no libtracecmd.
.PHONY: guest
guest: $(GUEST)

$(GUEST): $(GUEST_SRCS:user/%.c=$(BUILD)/user/%.o) $(LIB)
	$(CC) $(USER_CFLAGS) -o $@ $^ $(EXTRA_LDFLAGS) $(ZSTD_LIBS) -lpthread -lm

# The version from user/hgclock.c (VERSION, below), the one place it is defined.
$(BUILD)/user/guest_main.o: user/guest_main.c user/hgclock.c include/uapi/linux/hgclock.h \
		$(wildcard user/*.h user/*/*.h) $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -DHGCLOCK_VERSION='"$(VERSION)"' -c -o $@ $<

# The kselftest harness comes from Debian's linux-source tarball.
$(KSFT_HDR):
	tools/ksft-headers.sh "$(KSFT_DIR)"

selftests: $(SELFTESTS) $(UNIT_TESTS) $(BENCHES) $(NESTED_HELPERS) $(BUILD)/selftests/hgclock-events

# The application example, as the nested merge scenario runs it on both
# sides (static: the guest's initramfs has only the tool's libraries).
$(BUILD)/selftests/hgclock-events: tools/examples/hgclock-events.c $(LIB) $(SO_HDR)
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -static -Iuser/lib/include -o $@ $< $(LIB)

# Guest-side helpers of the nested tests: static, the guest has no libc.
$(NESTED_HELPERS): $(BUILD)/selftests/%: selftests/nested/%.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -static -o $@ $<

$(BUILD)/selftests/%: selftests/%.c selftests/test_util.h $(KSFT_HDR) $(LIB) include/uapi/linux/hgclock.h
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) $(TRACEFS_CFLAGS) -o $@ $< $(LIB) $(TRACEFS_LIBS) $(ZSTD_LIBS) \
		-lpthread -lm

$(BUILD)/unit/test_json: selftests/unit/test_json.c user/common/json.c $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_json.c user/common/json.c

$(BUILD)/unit/test_lib: selftests/unit/test_lib.c user/common/vcpu_lines.c user/common/plot_axis.c $(LIB) \
		$(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_lib.c user/common/util.c user/common/vcpu_lines.c \
		user/common/plot_axis.c $(LIB) $(ZSTD_LIBS) -lm

$(BUILD)/unit/test_sync: selftests/unit/test_sync.c selftests/unit/gen.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_sync.c $(LIB) $(ZSTD_LIBS) -lm

# The recorder's host records held into fewer sections (file-format.rst)
$(BUILD)/unit/test_hostsink: selftests/unit/test_hostsink.c user/record/writer.c user/common/util.c \
		user/record/record.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_hostsink.c user/record/writer.c \
		user/common/util.c $(LIB) $(ZSTD_LIBS) -lm

# Migration and restore: DISRUPTION sections, incarnations (sync.rst)
$(BUILD)/unit/test_disrupt: selftests/unit/test_disrupt.c selftests/unit/gen.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_disrupt.c $(LIB) $(ZSTD_LIBS) -lm

# test_cli.sh's helper (in bin/: not a test program, asan-check runs those): a
# recording with a disruption added, for merge's marks
$(BUILD)/unit/bin/gen_disrupt: selftests/unit/gen_disrupt.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/gen_disrupt.c $(LIB) $(ZSTD_LIBS) -lm

# The zero-syscall clock's methods over a meta area laid out as the module's (library.rst)
$(BUILD)/unit/test_uclock: selftests/unit/test_uclock.c selftests/unit/fake_clock.h selftests/test_util.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_uclock.c $(LIB) $(ZSTD_LIBS) -lpthread -lm

$(BUILD)/unit/test_events: selftests/unit/test_events.c selftests/unit/fake_clock.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_events.c $(LIB) $(ZSTD_LIBS) -lpthread -lm

# vCPU identity: guest CPUs to KVM vcpu_ids (sync.rst)
$(BUILD)/unit/test_identity: selftests/unit/test_identity.c selftests/unit/gen.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_identity.c $(LIB) $(ZSTD_LIBS) -lm

# Up to HGSYNC_MAX_GUESTS guests, allocated as loaded; on a 256 KiB stack
$(BUILD)/unit/test_manyguests: selftests/unit/test_manyguests.c $(LIB) $(KSFT_HDR) user/merge/merge.h selftests/unit/gen.h
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_manyguests.c $(LIB) $(ZSTD_LIBS) \
		-lpthread -lm

# Real recordings (selftests/data/capture.sh), unpacked next to the test.
MERGE_DATA := $(BUILD)/unit/data/merge.hgc $(BUILD)/unit/data/host.dat \
	$(BUILD)/unit/data/guest.dat $(BUILD)/unit/data/perf-sample.data \
	$(BUILD)/unit/data/many-host.dat
$(BUILD)/unit/data/%: selftests/data/%.xz
	@mkdir -p $(dir $@)
	xz -dc $< >$@.tmp && mv $@.tmp $@

$(BUILD)/unit/test_merge: selftests/unit/test_merge.c user/merge/merge.c user/merge/merge_in.c user/merge/merge_out.c user/merge/merge_par.c user/merge/sched_names.c \
		user/merge/trace_pool.c user/merge/trace_pool.h user/merge/ksyms.c user/merge/ksyms.h \
		user/merge/perf_in.c user/merge/perf_in.h user/merge/merge_report.c user/merge/merge_filter.c \
		user/common/json.c user/merge/merge.h selftests/unit/gen.h $(LIB) $(KSFT_HDR) $(MERGE_DATA)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) $(TRACECMD_CFLAGS) -o $@ selftests/unit/test_merge.c user/merge/merge.c user/merge/merge_in.c \
		user/merge/trace_pool.c user/merge/ksyms.c user/merge/sched_names.c \
		user/merge/merge_out.c user/merge/merge_par.c user/common/json.c user/merge/perf_in.c user/merge/merge_report.c \
		user/merge/merge_filter.c $(LIB) $(TRACECMD_LIBS) $(ZSTD_LIBS) $(KSYMS_LDFLAGS) \
		-lpthread -lm

$(BUILD)/unit/test_ksyms: selftests/unit/test_ksyms.c user/merge/ksyms.c user/merge/ksyms.h \
		user/merge/trace_pool.c user/merge/trace_pool.h $(KSFT_HDR) $(MERGE_DATA)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) $(TRACECMD_CFLAGS) -o $@ selftests/unit/test_ksyms.c user/merge/ksyms.c \
		user/merge/trace_pool.c $(TRACECMD_LIBS) $(KSYMS_LDFLAGS) -lpthread

# The tool's command line against the recording and the docs, in two
# halves that run at once (scripts; they find the source tree's
# Documentation and their shared cli_common.sh through @TOP@).
$(BUILD)/unit/test_cli $(BUILD)/unit/test_cli_outputs: $(BUILD)/unit/%: selftests/unit/%.sh \
		selftests/unit/cli_common.sh $(TOOL) $(MERGE_DATA) $(BUILD)/unit/bin/gen_disrupt
	@mkdir -p $(dir $@)
	sed 's|@TOP@|$(CURDIR)|' $< >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@

# KernelShark on merge --dat's files (a script); its library's view of
# them through ks_times, built when libkshark-dev is installed (the test
# reports a skip otherwise).
KSHARK_OK := $(shell pkg-config --exists libkshark 2>/dev/null && echo 1)
$(BUILD)/unit/test_kernelshark: selftests/unit/test_kernelshark.sh $(TOOL) $(MERGE_DATA) \
		$(if $(KSHARK_OK),$(BUILD)/unit/bin/ks_times)
	@mkdir -p $(dir $@)
	sed 's|@TOP@|$(CURDIR)|' $< >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@

# libkshark.h's typedefs trip -Wignored-qualifiers: its header, not ours.
$(BUILD)/unit/bin/ks_times: selftests/unit/ks_times.c
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -Wno-ignored-qualifiers $(shell pkg-config --cflags libkshark) \
		-o $@ $< $(shell pkg-config --libs libkshark)

# libhgclock.so for applications: install-lib into a temporary DESTDIR, the
# example built by pkg-config against it (a script; @TOP@ the source tree,
# @BUILD@ this build, whose make install-lib it runs: all built by then).
$(BUILD)/unit/test_libso: selftests/unit/test_libso.sh $(SO_LINKS) $(MAN3) user/lib/hgclock.pc.in \
		user/lib/libhgclock.map tools/examples/hgclock-clock.c
	@mkdir -p $(dir $@)
	sed -e 's|@TOP@|$(CURDIR)|' -e 's|@BUILD@|$(abspath $(BUILD))|' $< >$@.tmp && \
		chmod +x $@.tmp && mv $@.tmp $@

# The attribution engine on generated events (analyze.h)
$(BUILD)/unit/test_analyze: selftests/unit/test_analyze.c user/merge/analyze.c user/merge/analyze_names.c user/merge/analyze.h \
		user/merge/analyze_req.c user/merge/analyze_req.h user/merge/analyze_svg.c user/common/json.c $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_analyze.c user/merge/analyze.c user/merge/analyze_names.c \
		user/merge/analyze_req.c user/merge/analyze_svg.c user/common/json.c

# Marker pairing for guests without the module (markpair.h)
$(BUILD)/unit/test_markpair: selftests/unit/test_markpair.c selftests/unit/gen.h $(LIB) $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_markpair.c $(LIB) $(ZSTD_LIBS) -lm

$(BUILD)/unit/test_vmfind: selftests/unit/test_vmfind.c user/record/vmfind.c user/record/vmfind_args.c \
		user/record/vmfind.h $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_vmfind.c user/record/vmfind.c \
		user/record/vmfind_args.c

$(BUILD)/unit/test_corr: selftests/unit/test_corr.c user/lib/corr.c user/lib/corr_check.c user/lib/corr_rec.c \
		user/lib/corr.h user/lib/corr_check.h selftests/unit/gen.h $(KSFT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(SELFTEST_CFLAGS) -o $@ selftests/unit/test_corr.c user/lib/corr.c user/lib/corr_check.c \
		user/lib/corr_rec.c \
		$(ZSTD_LIBS)

# The correlation file reader under libFuzzer, ASan and UBSan (clang).
FUZZ_TIME ?= 20
# Its hostile mode edits a real recording (the unpacked merge.hgc, or the file
# HGCLOCK_FUZZ_BASE names) and runs the mapping on it: the library is built in,
# sanitized too, with plot's axes and convert's stdin parser.
$(BUILD)/fuzz/fuzz_corr: selftests/fuzz/fuzz_corr.c $(LIB_SRCS) user/common/plot_axis.c user/common/vcpu_lines.c \
		$(wildcard user/*.h user/*/*.h) $(LIB_HDRS) include/uapi/linux/hgclock.h $(BUILD)/unit/data/merge.hgc
	@mkdir -p $(dir $@)
	clang -g -O1 -std=gnu11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -Iinclude/uapi -Iuser $(USER_ROOMS_I) -Iuser/lib -Iuser/lib/include $(ZSTD_CFLAGS) \
		-DHGCLOCK_FUZZ_BASE_DEFAULT='"$(abspath $(BUILD)/unit/data/merge.hgc)"' \
		-o $@ selftests/fuzz/fuzz_corr.c $(LIB_SRCS) user/common/plot_axis.c user/common/vcpu_lines.c \
		$(ZSTD_LIBS) -lm

# A seed of the hostile mode (first byte odd): a few edits of the real recording.
# Compressed sections (format 1.4): a file of them, and the hostile mode on them
# (first byte 3: values inside frames; 7: the frames' bytes themselves).
fuzz: $(BUILD)/fuzz/fuzz_corr $(BUILD)/unit/test_corr
	@mkdir -p $(BUILD)/fuzz/corpus
	printf '\001\003\000\100\000\000\000\024\000\011\000\010\001\000\000\210\005\005\000\030\000\000\000\114\377' \
		>$(BUILD)/fuzz/corpus/hostile-seed
	HGCOR_SEED=$(BUILD)/fuzz/corpus/zstd-seed $(BUILD)/unit/test_corr -t round_trip_zstd >/dev/null
	printf '\003\003\000\100\000\000\000\024\000' >$(BUILD)/fuzz/corpus/hostile-zstd-seed
	printf '\007\003\000\020\000\000\000\024\000' >$(BUILD)/fuzz/corpus/hostile-frame-seed
	tools/fuzz.sh $(BUILD) $(FUZZ_TIME)

$(BUILD)/bench/bench_native_clock: selftests/unit/fake_clock.h tools/bench/bench_stats.h
$(BUILD)/bench/bench_read_clock: tools/bench/bench_stats.h

$(BUILD)/bench/bench_native_event: tools/bench/bench_native_event.c tools/bench/bench_tp.h \
		selftests/unit/fake_clock.h tools/bench/bench_stats.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) $(LTTNG_UST_CFLAGS) -Itools/bench -o $@ $< $(LIB) $(ZSTD_LIBS) \
		$(LTTNG_UST_LIBS) -lpthread -lm
$(BUILD)/bench/bench_compress: selftests/unit/gen.h
# The attribution engine alone, on generated hosts small and large (bench.rst)
$(BUILD)/bench/bench_analyze: tools/bench/bench_analyze.c tools/bench/bench_stats.h \
		user/merge/analyze.c user/merge/analyze_names.c user/merge/analyze.h user/common/json.c
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -Itools/bench -o $@ $< user/merge/analyze.c user/merge/analyze_names.c \
		user/common/json.c -lm

$(BUILD)/bench/%: tools/bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(USER_CFLAGS) -o $@ $< $(LIB) $(ZSTD_LIBS) -lm

unit: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do $$t || exit 1; done

# The UAPI header must compile alone, as C90.
headers-check:
	echo '#include <linux/hgclock.h>' | $(CC) -std=c90 -pedantic -Wall -Werror \
		-Iinclude/uapi -x c -fsyntax-only -

# No circle of calls between the tool's and the library's files
# (tools/layer-check.py, from the objects' symbols): TAP on stdout.
layer-check: $(LIB_SRCS:user/%.c=$(BUILD)/user/%.o) $(TOOL_SRCS:user/%.c=$(BUILD)/user/%.o)
	@tools/layer-check.py $^

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
# Three parts that never install the same file: user space and the module,
# the module either for one kernel or through DKMS (never both: each refuses
# when the other is there).  Or packages: make deb.
#
#   make install [DESTDIR=...] [PREFIX=/usr/local]   tool, man pages, udev rule, group,
#                                                    and install-lib:
#   make install-lib [DESTDIR=...] [PREFIX=...] [LIBDIR=PREFIX/lib]
#                    libhgclock.so.1 and its links, <hgclock/hgclock.h>,
#                    hgclock.pc, the section 3 man pages
#   make install-module [DESTDIR=...] [KDIR=...]     the module for KDIR's kernel
#   make dkms-install                                the module by DKMS, every kernel
#   make uninstall, uninstall-lib, uninstall-module, dkms-uninstall, man, dkms-src
#   make deb                                         Debian packages into $(BUILD)/deb
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
# The schema of merge --perfetto's files, for protoc --decode (merge.rst).
DATADIR ?= $(PREFIX)/share
UDEVRULESDIR ?= /etc/udev/rules.d
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MAN_PAGES := $(patsubst Documentation/man/%.rst,$(BUILD)/man/%.1,$(wildcard Documentation/man/*.rst))
# hgclock-guest(1) is not a command of hgclock's: its page lives with the packaging.
GUEST_MAN := $(BUILD)/man/guest/hgclock-guest.1

.PHONY: install uninstall install-lib uninstall-lib install-module uninstall-module man \
	dkms-src dkms-install dkms-uninstall kver-check deb

kver-check:
	@test -n "$(KVER)" || { echo "make: no kernel release for KDIR='$(KDIR)': install linux-headers (tools/deps.sh) or pass KDIR=" >&2; exit 1; }

$(MODULE_KO): Kbuild $(wildcard module/*.c module/*.h) include/uapi/linux/hgclock.h | kver-check
	tools/build-module.sh "$(KDIR_REAL)" "$(BUILD)/module"

man: $(MAN_PAGES) $(GUEST_MAN) $(MAN3)

$(MAN3_PAGES): $(BUILD)/man/man3/%.3: Documentation/man/man3/%.rst $(SO_HDR)
	@mkdir -p $(dir $@)
	sed '/^:Manual section:/a :Version: libhgclock $(SO_VERSION)' $< >$(@:.3=.rst)
	rst2man --halt=warning --input-encoding=utf-8 $(@:.3=.rst) $@.tmp
	mv $@.tmp $@

$(MAN3_LINKS):
	@mkdir -p $(dir $@)
	echo '.so man3/hgclock_clock_open.3' >$@

$(MAN3_EV_LINKS):
	@mkdir -p $(dir $@)
	echo '.so man3/hgclock_events_open.3' >$@

$(GUEST_MAN): $(BUILD)/man/guest/%.1: tools/pkg/%.rst user/hgclock.c
	@mkdir -p $(dir $@)
	sed '/^:Manual section:/a :Version: hgclock $(VERSION)' $< >$(@:.1=.rst)
	rst2man --halt=warning --input-encoding=utf-8 $(@:.1=.rst) $@.tmp
	mv $@.tmp $@

$(BUILD)/man/%.1: Documentation/man/%.rst user/hgclock.c
	@mkdir -p $(dir $@)
	sed '/^:Manual section:/a :Version: hgclock $(VERSION)' $< >$(@:.1=.rst)
	rst2man --halt=warning --input-encoding=utf-8 $(@:.1=.rst) $@.tmp
	mv $@.tmp $@

# User space only: the module comes from install-module or dkms-install.
install: $(TOOL) man install-lib
	install -D -m 0755 $(TOOL) $(DESTDIR)$(BINDIR)/hgclock
	install -D -m 0644 tools/udev/60-hgclock.rules $(DESTDIR)$(UDEVRULESDIR)/60-hgclock.rules
	install -d -m 0755 $(DESTDIR)$(MANDIR)/man1
	install -m 0644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	install -D -m 0644 user/merge/perfetto_trace.proto $(DESTDIR)$(DATADIR)/hgclock/perfetto_trace.proto
	@if [ -z "$(DESTDIR)" ]; then \
		set -e; \
		getent group hgclock >/dev/null || groupadd --system hgclock; \
		if command -v udevadm >/dev/null; then \
			udevadm control --reload || true; \
			udevadm trigger --subsystem-match=misc --sysname-match=hgclock || true; \
		fi; \
	fi

uninstall: uninstall-lib
	rm -f $(DESTDIR)$(BINDIR)/hgclock \
		$(DESTDIR)$(UDEVRULESDIR)/60-hgclock.rules \
		$(DESTDIR)$(MANDIR)/man1/hgclock.1 $(DESTDIR)$(MANDIR)/man1/hgclock-*.1 \
		$(DESTDIR)$(DATADIR)/hgclock/perfetto_trace.proto
	-rmdir $(DESTDIR)$(DATADIR)/hgclock 2>/dev/null

# The library for applications (Documentation/library.rst).  hgclock.pc is
# written here, with the directories of this install; ldconfig runs only
# without DESTDIR (packages run it by their trigger).
install-lib: $(SO_REAL) $(MAN3)
	install -D -m 0644 $(SO_REAL) $(DESTDIR)$(LIBDIR)/$(notdir $(SO_REAL))
	ln -sfn $(notdir $(SO_REAL)) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sfn $(SO_NAME) $(DESTDIR)$(LIBDIR)/libhgclock.so
	install -D -m 0644 $(SO_HDR) $(DESTDIR)$(INCLUDEDIR)/hgclock/hgclock.h
	install -d -m 0755 $(DESTDIR)$(PKGCONFIGDIR)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(SO_VERSION)|' \
		user/lib/hgclock.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/hgclock.pc.tmp
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/hgclock.pc.tmp
	mv $(DESTDIR)$(PKGCONFIGDIR)/hgclock.pc.tmp $(DESTDIR)$(PKGCONFIGDIR)/hgclock.pc
	install -d -m 0755 $(DESTDIR)$(MANDIR)/man3
	install -m 0644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall-lib:
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(SO_REAL)) $(DESTDIR)$(LIBDIR)/$(SO_NAME) \
		$(DESTDIR)$(LIBDIR)/libhgclock.so $(DESTDIR)$(INCLUDEDIR)/hgclock/hgclock.h \
		$(DESTDIR)$(PKGCONFIGDIR)/hgclock.pc $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3)))
	rmdir --ignore-fail-on-non-empty $(DESTDIR)$(INCLUDEDIR)/hgclock 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then ldconfig; fi

# The module for KDIR's kernel only, without DKMS (no rebuild on kernel updates).
# DKMS's copy goes to updates/dkms/: with both, which one modprobe loads would
# depend on depmod's directory walk, so each refuses while the other is there.
install-module: kver-check $(MODULE_KO)
	@if [ -z "$(DESTDIR)" ] && command -v dkms >/dev/null && \
		dkms status -m hgclock -k $(KVER) 2>/dev/null | grep -q ': installed'; then \
		echo "make: DKMS has hgclock installed for $(KVER): make dkms-uninstall first" >&2; \
		exit 1; \
	fi
	install -D -m 0644 $(MODULE_KO) $(DESTDIR)/lib/modules/$(KVER)/updates/hgclock.ko
	@if [ -z "$(DESTDIR)" ]; then set -e; depmod -a $(KVER); fi

uninstall-module: kver-check
	rm -f $(DESTDIR)/lib/modules/$(KVER)/updates/hgclock.ko
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

dkms-install:
	@test -z "$(DESTDIR)" || { echo "make: dkms-install installs into the system: no DESTDIR" >&2; exit 1; }
	@plain=$$(ls /lib/modules/*/updates/hgclock.ko 2>/dev/null || true); \
	test -z "$$plain" || { echo "make: $$plain from make install-module: make uninstall-module KDIR=... first" >&2; exit 1; }
	@! dpkg-query -W -f '$${Status}\n' hgclock-dkms 2>/dev/null | grep -q ' installed$$' || \
		{ echo "make: the hgclock-dkms package owns /usr/src/hgclock-$(VERSION): remove it first" >&2; exit 1; }
	$(MAKE) dkms-src
	dkms add hgclock/$(VERSION)
	kernels=$$(for b in /lib/modules/*/build; do [ -f "$$b/Makefile" ] && basename "$${b%/build}"; done); \
	test -n "$$kernels" || { echo "make: no kernel headers in /lib/modules/*/build" >&2; exit 1; }; \
	dkms install hgclock/$(VERSION) $$(printf -- '-k %s ' $$kernels)

dkms-uninstall:
	dkms remove hgclock/$(VERSION) --all
	rm -rf $(DKMS_SRC)

# Debian packages (debian/): dpkg-buildpackage on a copy of the tree in
# $(BUILD)/deb, where the .debs land too; only user space is compiled here,
# the module by DKMS where hgclock-dkms is installed.  tools/deb-check.sh
# runs lintian and checks the packages.
deb:
	tools/deb-build.sh "$(BUILD)/deb"

# ---- User space under AddressSanitizer and UBSan ---------------------------
#
# The tool, libhgclock and the unit tests, built with SAN_CC (default CC)
# into SAN_BUILD; tools/asan-check.sh runs them (make asan-check).  Not
# test_libso: it installs libhgclock.so and loads it into an example built
# without the sanitizers, which an instrumented library cannot be.
SAN_BUILD ?= $(BUILD)/asan
SAN_CC ?= $(CC)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

.PHONY: asan asan-check

asan: $(KSFT_HDR)
	$(MAKE) BUILD=$(SAN_BUILD) CC=$(SAN_CC) KSFT_DIR=$(KSFT_DIR) \
		EXTRA_CFLAGS="$(EXTRA_CFLAGS) $(SAN_FLAGS)" \
		EXTRA_LDFLAGS="$(EXTRA_LDFLAGS) $(SAN_FLAGS)" \
		SELFTEST_CFLAGS="$(SELFTEST_CFLAGS) $(SAN_FLAGS)" \
		$(SAN_BUILD)/user/hgclock \
		$(patsubst $(BUILD)/%,$(SAN_BUILD)/%,$(filter-out %/test_libso %/test_kernelshark,$(UNIT_TESTS)))

asan-check: asan $(BUILD)/unit/test_corr
	tools/asan-check.sh $(BUILD) $(SAN_BUILD)
