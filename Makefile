# lockbox build: `make` builds build/lockboxd, build/lockbox-pyzygote (its
# warm Python template) and build/lockbox (the client), `make check` runs
# the unit tests and the layer check (no circle between source files) in
# seconds, `make test` adds the format check, the integration and attack
# suites and a short fuzzing smoke run, `make run` starts the daemon on
# conf/config.yaml. SAN=address,undefined builds everything with
# sanitizers, on top of the given CFLAGS. `make fuzz` builds the libFuzzer
# targets (clang) into build/fuzz/; docs/TESTING.md says how to use them.

CC       ?= cc
BUILD    ?= build
PKGS     := libmicrohttpd jansson yaml-0.1 libseccomp libmnl libnftables sqlite3 libarchive nettle
PYTHON   ?= /usr/bin/python3
CONFIG   ?= conf/config.yaml

# Recursive (=) so pkg-config runs only when a recipe needs it, after
# scripts/install-deps had the chance to install it on a fresh machine.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
# The lockbox client alone links libcurl; the daemon never does.
CLI_PKGS   := libcurl jansson
CLI_CFLAGS = $(shell pkg-config --cflags $(CLI_PKGS))
CLI_LIBS   = $(shell pkg-config --libs $(CLI_PKGS))
# The Python zygote embeds the interpreter python_path must name (Debian's).
ZYG_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags python3-embed)) \
             -DLOCKBOX_PYTHON_EXECUTABLE='"$(shell readlink -f $(PYTHON))"'
ZYG_LIBS   = $(shell pkg-config --libs python3-embed) $(LIBS)

WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 \
            -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
            -Wwrite-strings -Wundef -Wvla -Wnull-dereference \
            -Wimplicit-fallthrough -Wno-unused-parameter
HARDEN   := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection \
            -fPIE -fcf-protection

ifneq ($(SAN),)
  # Sanitizer builds: _FORTIFY_SOURCE conflicts with ASan's interceptors.
  # The sanitizer flags come on top of the user's CFLAGS and LDFLAGS (whose
  # default is then -O1 -g), never instead of them.
  HARDEN := -fstack-protector-strong -fPIE
  CFLAGS ?= -O1 -g
  SAN_CFLAGS := -fno-omit-frame-pointer -fsanitize=$(SAN) -fno-sanitize-recover=all
  SAN_LDFLAGS := -fsanitize=$(SAN)
  BUILD := build/san
endif
CFLAGS   ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(HARDEN) $(CFLAGS) $(SAN_CFLAGS) -Isrc $(PKG_CFLAGS) \
             -MMD -MP
LDFLAGS  ?=
ALL_LDFLAGS = -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack $(LDFLAGS) $(SAN_LDFLAGS)
LIBS     = $(PKG_LIBS) -lpthread

LIB_SRCS  := $(sort $(wildcard src/base/*.c src/config/*.c src/http/*.c \
                     src/ipc/*.c src/jail/*.c src/runtime/*.c \
                     src/jailer/*.c src/deps/*.c src/daemon/*.c src/net/*.c \
                     src/shell/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_OBJS := $(UNIT_SRCS:%.c=$(BUILD)/%.o)
CLI_SRCS  := $(sort $(wildcard src/cli/*.c))
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/%.o)
ZYG_SRCS  := $(sort $(wildcard src/zygote/*.c))
ZYG_OBJS  := $(ZYG_SRCS:%.c=$(BUILD)/%.o)
# The zygote's own unit tests link the embedded interpreter: a binary of
# their own (build/zygote_unit_tests), so build/unit_tests does not.
ZUNIT_SRCS := $(sort $(wildcard tests/unit/zygote/*.c))
ZUNIT_OBJS := $(ZUNIT_SRCS:%.c=$(BUILD)/%.o)
ifneq ($(SAN),)
  # The zygote runs programs in its own image: see tests/san/zygote_options.c.
  ZYG_OBJS += $(BUILD)/tests/san/zygote_options.o
endif

.PHONY: all deps run test unit integration integration-cold attacks attacks-cold clean \
        format format-check fuzz fuzz-smoke fuzz-regressions layers check

all: $(BUILD)/lockboxd $(BUILD)/lockbox $(BUILD)/lockbox-pyzygote

deps:
	@scripts/install-deps

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/liblockbox.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/lockboxd: $(BUILD)/src/main.o $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(CLI_OBJS): ALL_CFLAGS += $(CLI_CFLAGS)

$(BUILD)/lockbox: $(CLI_OBJS) $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CLI_LIBS)

$(ZYG_OBJS) $(ZUNIT_OBJS): ALL_CFLAGS += $(ZYG_CFLAGS)

$(BUILD)/lockbox-pyzygote: $(ZYG_OBJS) $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ZYG_LIBS)

# tests/unit/test_cli.c links the client's source.c and runs build/lockbox.
$(BUILD)/unit_tests: $(UNIT_OBJS) $(BUILD)/src/cli/source.o $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(ZUNIT_OBJS): ALL_CFLAGS += -Itests/unit

$(BUILD)/zygote_unit_tests: $(ZUNIT_OBJS) $(BUILD)/tests/unit/main.o $(BUILD)/tests/unit/util.o \
                            $(filter-out $(BUILD)/src/zygote/main.o,$(ZYG_OBJS)) $(BUILD)/liblockbox.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ZYG_LIBS)

run: all
	$(BUILD)/lockboxd --config $(CONFIG)

unit: $(BUILD)/unit_tests $(BUILD)/zygote_unit_tests $(BUILD)/lockbox
	$(BUILD)/unit_tests
	$(BUILD)/zygote_unit_tests

# Every pytest pass prints its 40 slowest steps (setup, call, teardown):
# the CI log then says where the time went.
PYTEST   = $(PYTHON) -m pytest -q -p no:cacheprovider -p tests.failedlog --durations=40
TEST_ENV = LOCKBOXD=$(abspath $(BUILD)/lockboxd) LOCKBOX=$(abspath $(BUILD)/lockbox)

# The suite runs against warm daemons (the default), then again cold.
integration: all
	$(TEST_ENV) $(PYTEST) tests/integration

# The cold pass leaves out the files whose subject does not depend on how
# runs start: shell jobs (no warm pool), the HTTP side, configuration, the
# client, the daemon's life, the DNS relay, the lab's own check, the zygote
# under each huge-page mode and the warm pools themselves (their daemons
# name warm.mode: they are the same whatever the pass).
COLD_SKIP := test_shell_* test_bad_input.py test_cli.py test_config.py test_dns_relay.py \
             test_http_process.py test_lifecycle.py test_netlab_selfcheck.py test_zygote_thp.py \
             test_warm.py
integration-cold: all
	LOCKBOX_TEST_MODE=cold $(TEST_ENV) $(PYTEST) \
	  $(foreach f,$(COLD_SKIP),--ignore-glob='*/$(f)') tests/integration

# tests/attacks: hostile programs against the real daemon, and what must
# hold after each (docs/TESTING.md). The cold pass leaves out the shell
# jobs (no warm pool) and the DNS relay (a thread of the HTTP process).
ATTACKS_COLD_SKIP := test_attack_shell* test_attack_dns.py
attacks: all
	$(TEST_ENV) $(PYTEST) tests/attacks

attacks-cold: all
	LOCKBOX_TEST_MODE=cold $(TEST_ENV) $(PYTEST) \
	  $(foreach f,$(ATTACKS_COLD_SKIP),--ignore-glob='*/$(f)') tests/attacks

# `make test` runs the same four passes, file for file, in two lanes side
# by side (one pass alone leaves the machine idle half the time: daemons
# starting, runs waiting). The lab lane takes every file that names the
# network lab (one lab per host, held by a pytest session to its end) and
# the shell-job files (fixed UID blocks: snapshotlib, test_shell_ops.py,
# ...), and LAB_EVEN's files to even them out; the main lane the others. Each
# lane runs integration warm, cold, attacks warm, cold, in that order, one
# pytest session each, with a UID base and run subnets of its own
# (docs/TESTING.md). The tests that change
# or compare host-wide state (the THP mode; every lbx link, lockbox nftables
# table and ip_forward, which any other daemon changes) run first, alone.
ALONE_TESTS := test_egress.py::test_nothing_left_on_the_host_after_stop \
               test_egress.py::test_stopping_one_daemon_leaves_the_others_network \
               test_network.py::test_host_mode_shares_the_hosts_network
ALONE      := test_zygote_thp.py $(ALONE_TESTS)
# Files the lab lane also takes, to even the lanes out: none since the
# shell files grew (the lab lane was the longer by 100 s with test_limits.py).
LAB_EVEN   :=
# Shell-job files with no fixed UID block, run in the main lane to even
# the lanes out.
MAIN_EVEN  := test_shell_spare.py test_attack_shell_spare_red.py
LAB_FILES  := $(filter-out $(MAIN_EVEN),$(sort $(notdir \
                $(shell grep -lw netlab tests/integration/test_*.py tests/attacks/test_*.py) \
                $(wildcard tests/integration/test_shell_*.py tests/attacks/test_attack_shell*.py)) \
                $(LAB_EVEN)))
IT_FILES   := $(filter-out $(ALONE),$(notdir $(wildcard tests/integration/test_*.py)))
AT_FILES   := $(notdir $(wildcard tests/attacks/test_*.py))
IT_COLD    := $(filter-out $(subst *,%,$(COLD_SKIP)),$(IT_FILES))
AT_COLD    := $(filter-out $(subst *,%,$(ATTACKS_COLD_SKIP)),$(AT_FILES))
LANE_lab   := LOCKBOX_TEST_UID_BASE=9000000 LOCKBOX_TEST_NET_OCTET=208
LANE_main  := LOCKBOX_TEST_UID_BASE=9500000 LOCKBOX_TEST_NET_OCTET=224
lane_files  = $(if $(filter lab,$(1)),$(filter $(LAB_FILES),$(2)),$(filter-out $(LAB_FILES),$(2)))
# $(call lane_pass,LANE,MODE,DIR,FILES)
lane_pass   = $(if $(call lane_files,$(1),$(4)),LOCKBOX_TEST_MODE=$(2) $(LANE_$(1)) $(TEST_ENV) \
                LOCKBOX_TEST_FAILED_LOG=$(abspath $(BUILD))/lanes/$@.failed \
                $(PYTEST) $(if $(filter tests/integration,$(3)),$(ALONE_TESTS:%=--deselect $(3)/%)) \
                $(addprefix $(3)/,$(call lane_files,$(1),$(4))),@echo "$@: no files")

.PHONY: integration-alone lanes $(foreach l,lab main,$(foreach p,it it-cold at at-cold,lane-$(l)-$(p) lane-$(l)-$(p)-again))
integration-alone: all
	$(TEST_ENV) $(PYTEST) $(addprefix tests/integration/,$(ALONE))
	LOCKBOX_TEST_MODE=cold $(TEST_ENV) $(PYTEST) \
	  $(addprefix tests/integration/,$(filter-out $(subst *,%,$(COLD_SKIP)),$(ALONE)))

# Each lane's passes one after the other (order-only prerequisites); the
# two lanes side by side, each pass's output in one piece when it ends.
# Then the tests a failed pass named run again, alone, one pass after the
# other (scripts/rerun-failed): `make lanes` fails if one fails again, or
# if a failed pass named none; otherwise it passes and names them.
lanes: all
	@rm -rf $(BUILD)/lanes.failed $(BUILD)/lanes && mkdir -p $(BUILD)/lanes
	@$(MAKE) --no-print-directory -j2 --output-sync=target LANES_FAILED=$(BUILD)/lanes.failed \
	  lane-lab-at-cold lane-main-at-cold
	@if [ -s $(BUILD)/lanes.failed ]; then \
	  echo "lanes: failed:" $$(cat $(BUILD)/lanes.failed) "(running their failed tests again, alone)"; \
	  $(MAKE) --no-print-directory $$(sed 's/$$/-again/' $(BUILD)/lanes.failed) || \
	    { echo "lanes: failed again alone:" $$(cat $(BUILD)/lanes.failed); exit 1; }; \
	  echo "lanes: passed; these failed under the lanes' load and passed alone:"; \
	  cat $(BUILD)/lanes/*.failed | sed 's|^$(CURDIR)/|  |' | sort -u; fi
# Under `make lanes` a failed pass is noted and its lane goes on (every
# failure shows in one run); alone, a lane-* target fails as it is.
define lane_rules
lane-$(1)-it: all
	$$(call lane_pass,$(1),warm,tests/integration,$$(IT_FILES))$$(lane_note)
lane-$(1)-it-cold: all | lane-$(1)-it
	$$(call lane_pass,$(1),cold,tests/integration,$$(IT_COLD))$$(lane_note)
lane-$(1)-at: all | lane-$(1)-it-cold
	$$(call lane_pass,$(1),warm,tests/attacks,$$(AT_FILES))$$(lane_note)
lane-$(1)-at-cold: all | lane-$(1)-at
	$$(call lane_pass,$(1),cold,tests/attacks,$$(AT_COLD))$$(lane_note)
lane-$(1)-it-again:
	$$(call again_pass,$(1),warm)
lane-$(1)-it-cold-again:
	$$(call again_pass,$(1),cold)
lane-$(1)-at-again:
	$$(call again_pass,$(1),warm)
lane-$(1)-at-cold-again:
	$$(call again_pass,$(1),cold)
endef
# $(call again_pass,LANE,MODE) in lane-*-again: the pass's failed tests
again_pass  = LOCKBOX_TEST_MODE=$(2) $(LANE_$(1)) $(TEST_ENV) \
                $(PYTHON) scripts/rerun-failed $(@:-again=) $(BUILD)/lanes/$(@:-again=).failed
lane_note = $(if $(LANES_FAILED), || echo $@ >>$(LANES_FAILED))
$(foreach l,lab main,$(eval $(call lane_rules,$(l))))

# No circle between source files: for each object, the objects defining
# the symbols it uses (scripts/check-layers, with nm).
layers: $(LIB_OBJS) $(CLI_OBJS) $(ZYG_OBJS) $(BUILD)/src/main.o
	@$(PYTHON) scripts/check-layers $^

# The quick checks: unit tests and layers, in seconds, as any user (the
# few cases that need root skip themselves, saying why, without it).
check: unit layers

test: format-check layers unit integration-alone lanes fuzz-smoke

# libFuzzer targets (tests/fuzz/), always built with clang, ASan and UBSan
# whatever SAN says; each links only the src/ files it exercises, compiled
# straight in with the fuzzer's coverage instrumentation.
FUZZ_CC      ?= clang
FUZZ_BUILD   := build/fuzz
FUZZ_TIME    ?= 10
FUZZ_TARGETS := fuzz_request fuzz_headers fuzz_config fuzz_deps fuzz_dns fuzz_sanitize \
                fuzz_shell_request fuzz_exclude
FUZZ_PKGS    := jansson yaml-0.1 libseccomp
FUZZ_CFLAGS   = -std=c11 -D_GNU_SOURCE $(WARN) -Wno-unknown-warning-option -g -O1 \
                -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all -Isrc -Itests/fuzz \
                $(shell pkg-config --cflags $(FUZZ_PKGS))
FUZZ_LIBS     = $(shell pkg-config --libs $(FUZZ_PKGS))
FUZZ_SRCS_fuzz_request      := src/http/request.c src/http/result.c src/base/utf8.c \
                               src/base/strbuf.c src/ipc/outcome.c
FUZZ_SRCS_fuzz_headers      := src/base/trace.c src/http/request.c src/base/utf8.c
# fuzz_config stands in for src/base/log.c (it drops log lines).
FUZZ_SRCS_fuzz_config       := $(sort $(wildcard src/config/*.c)) src/base/parse.c src/base/netaddr.c \
                               src/base/file.c \
                               src/base/strbuf.c src/base/utf8.c
FUZZ_SRCS_fuzz_deps         := src/deps/deps_text.c
FUZZ_SRCS_fuzz_dns          := src/net/dnsmsg.c
FUZZ_SRCS_fuzz_sanitize     := src/shell/sanitize.c src/shell/window.c src/base/strbuf.c \
                               src/base/utf8.c
FUZZ_SRCS_fuzz_shell_request := src/http/shell_decode.c src/http/shell_encode.c \
                               src/ipc/shell_proto.c src/ipc/channel.c src/base/strbuf.c \
                               src/base/utf8.c
FUZZ_SRCS_fuzz_exclude      := src/shell/exclude.c
FUZZ_HDRS    := $(wildcard src/*/*.h) tests/fuzz/fuzz.h
# Runs every seed and committed crash input of target $$t once (libFuzzer
# runs the files named on its command line); the log is shown on failure.
FUZZ_REPLAY  = files=$$(find tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t -type f \
                        2>/dev/null | sort); \
               $(FUZZ_BUILD)/$$t -timeout=10 $$files >$(FUZZ_BUILD)/$$t.replay.log 2>&1 \
               || { tail -n 60 $(FUZZ_BUILD)/$$t.replay.log; exit 1; }

define fuzz_rule
$(FUZZ_BUILD)/$(1): tests/fuzz/$(1).c $$(FUZZ_SRCS_$(1)) $$(FUZZ_HDRS)
	@mkdir -p $$(dir $$@)
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ tests/fuzz/$(1).c $$(FUZZ_SRCS_$(1)) $$(FUZZ_LIBS)
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_rule,$(t))))

# The targets build FUZZ_JOBS at a time (each is one clang command).
FUZZ_JOBS    ?= 2
.PHONY: fuzz-binaries
fuzz:
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) fuzz-binaries
fuzz-binaries: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)

fuzz-regressions: fuzz
	@for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_REPLAY); \
	  echo "fuzz-regressions: $$t: $$(echo $$files | wc -w) inputs ok"; \
	done

# FUZZ_TIME seconds per target from the seeds, FUZZ_JOBS targets at a time
# (a fuzzer uses one core); new inputs go to build/fuzz/corpus/<target>,
# crashes to build/fuzz/artifacts/. Any crash, leak, UBSan report or 10 s
# hang fails the run.
fuzz-smoke: fuzz-regressions
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) --output-sync=target $(FUZZ_TARGETS:%=fuzz-smoke-%)

.PHONY: $(FUZZ_TARGETS:%=fuzz-smoke-%)
$(FUZZ_TARGETS:%=fuzz-smoke-%): fuzz-smoke-%: $(FUZZ_BUILD)/%
	@mkdir -p $(FUZZ_BUILD)/corpus/$* $(FUZZ_BUILD)/artifacts
	@echo "fuzz-smoke: $* for $(FUZZ_TIME)s"
	@dict=; [ -f tests/fuzz/$*.dict ] && dict=-dict=tests/fuzz/$*.dict; \
	$(FUZZ_BUILD)/$* -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/artifacts/$*- $$dict \
	  $(FUZZ_BUILD)/corpus/$* tests/fuzz/corpus/$* >$(FUZZ_BUILD)/$*.log 2>&1 \
	  || { tail -n 80 $(FUZZ_BUILD)/$*.log; exit 1; }; \
	grep -h 'stat::number_of_executed_units' $(FUZZ_BUILD)/$*.log

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(ZYG_OBJS:.o=.d) $(ZUNIT_OBJS:.o=.d) \
         $(BUILD)/src/main.d

# Every C file in the project's .clang-format style: `make format` rewrites
# them, `make format-check` (part of `make test`) fails on any difference.
FORMAT_SRCS := $(sort $(wildcard src/*.[ch] src/*/*.[ch] tests/unit/*.[ch] tests/unit/zygote/*.[ch] \
                                 tests/fuzz/*.[ch] \
                                 tests/san/*.[ch]))

format:
	clang-format -i $(FORMAT_SRCS)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)
