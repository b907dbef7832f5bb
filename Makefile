# memgrant: GNU make.  ./configure writes config.mk; `make` runs it when missing.
# Objects go to build/; one static library per folder, programs link them.

.DEFAULT_GOAL := all

ifeq ($(filter distclean clean,$(MAKECMDGOALS)),)
include config.mk
endif

# On a fresh machine configure would stop at the first missing library, before
# any goal runs: install what the build needs first (Debian, as root), then configure.
config.mk:
	@packaging/install-deps.sh --if-missing=build
	./configure

V ?= 0
Q := $(if $(filter 1,$(V)),,@)
B ?= build

ALL_CFLAGS = -std=gnu11 -D_GNU_SOURCE -I. $(WARNFLAGS) $(SANFLAGS) $(CFLAGS) $(CPPFLAGS) \
	-DSYSCONFDIR='"$(SYSCONFDIR)"' -DLOCALSTATEDIR='"$(LOCALSTATEDIR)"' \
	-DRUNSTATEDIR='"$(RUNSTATEDIR)"' -DMEMGRANT_VERSION='"$(VERSION)"'
# --as-needed: a program records only the libraries its objects call
ALL_LDFLAGS = $(SANFLAGS) $(LDFLAGS) -Wl,--as-needed
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.1.0)

# --- sources -----------------------------------------------------------------
# lib/: generic helpers; hotplug/: the kernel side (block model, planner,
# policy, live table, the sysfs and sim backends, both ends of the privilege
# split's wire); agent/: memgrantd (engine/, exec/, journal/) and memgrantctl
# (ctl/); providers/: the adapters (views/: the engine's views as JSON, for
# every adapter) and memgrant-host (host/: cli/, serve/ and the guest link
# both share); lib/wire/: the port's typed messages and reports and their
# codecs, below the engine and the adapters alike.
LIB_SRC := $(wildcard lib/*.c)
WIRE_SRC := $(wildcard lib/wire/*.c)
HOTPLUG_SRC := $(wildcard hotplug/*.c hotplug/sysfs/*.c hotplug/sim/*.c) \
	hotplug/privsep/helper_client.c hotplug/privsep/helper_serve.c hotplug/privsep/cred_channel.c
# the helper's start and the confinement of both processes, linked into memgrantd
PRIVSEP_AGENT_SRC := hotplug/privsep/spawn.c hotplug/privsep/sandbox.c
CONFIG_SRC := $(wildcard config/*.c)
AGENT_SRC := agent/reload.c agent/cred_files.c $(wildcard agent/engine/*.c agent/exec/*.c agent/journal/*.c)
HOST_SRC := $(wildcard providers/host/*.c providers/host/cli/*.c providers/host/serve/*.c)
PROVIDERS_SRC := $(wildcard providers/*.c providers/hooks/*.c providers/views/*.c)
CTL_SRC := $(wildcard agent/ctl/*.c agent/ctl/lsmem/*.c)

CTL_LIB := $(B)/libctl.a
MG_LIB := $(B)/libmg.a
HOTPLUG_LIB := $(B)/libhotplug.a
WIRE_LIB := $(B)/libwire.a
AGENT_LIB := $(B)/libagent.a

AGENT_CFLAGS = $(JANSSON_CFLAGS) $(MHD_CFLAGS) $(YAML_CFLAGS) $(SMARTCOLS_CFLAGS) \
	$(CURL_CFLAGS) $(CRYPTO_CFLAGS) $(SSL_CFLAGS) $(SYSTEMD_CFLAGS) $(SECCOMP_CFLAGS)
# libcurl, libcrypto and libssl are not linked: lib/curl_dl.c, lib/crypto_dl.c
# and lib/ssl_dl.c load them when HTTPS, a webhook, a client certificate or memgrantctl's talk
# to the daemon needs them (only their headers are used here)
# nor libsystemd: lib/sdnotify.c and lib/log_journald.c speak its two
# protocols (a datagram each) without its dependencies
AGENT_LIBS = $(JANSSON_LIBS) $(MHD_LIBS) $(YAML_LIBS) $(SMARTCOLS_LIBS) $(SECCOMP_LIBS) -lpthread \
	$(if $(filter 1,$(LINKED_LIBS)),$(CURL_LIBS) $(CRYPTO_LIBS) $(SSL_LIBS))
# The loaded libraries' sonames come from lib/dlopen.list (packaging reads it
# too).  configure --enable-linked-libs links them instead: the code's
# sym_NAME calls are then libcurl's own, with curl.h's type checks (CI).
dlopen_soname = $(shell awk -F';' '$$1 == "$(1)" { print $$2 }' lib/dlopen.list)
$(B)/lib/curl_dl.o: ALL_CFLAGS += -DMEMGRANT_CURL_SONAME='"$(call dlopen_soname,curl)"'
$(B)/lib/crypto_dl.o: ALL_CFLAGS += -DMEMGRANT_CRYPTO_SONAME='"$(call dlopen_soname,crypto)"'
$(B)/lib/ssl_dl.o: ALL_CFLAGS += -DMEMGRANT_SSL_SONAME='"$(call dlopen_soname,ssl)"'
# memgrantctl's client tells libcrypto to skip its cipher tables before libcurl loads
$(B)/agent/ctl/ctl_client.o: ALL_CFLAGS += -DMEMGRANT_CRYPTO_SONAME='"$(call dlopen_soname,crypto)"'
ifeq ($(LINKED_LIBS),1)
ALL_CFLAGS += -DMEMGRANT_LINKED_LIBS
# curl.h's checks are warnings raised inside a system header's macro: gcc
# shows them only with -Wsystem-headers (on the files that call libcurl)
CURL_CALLERS := agent/ctl/ctl_client.c config/keys.c providers/hooks/webhook.c providers/https.c providers/https_http.c \
	providers/https_ca.c
$(patsubst %.c,$(B)/%.o,$(CURL_CALLERS)): ALL_CFLAGS += -Wsystem-headers -Werror=attribute-warning
endif

# unit tests mirror the source folders; build/tests/test_NAME from
# tests/unit/.../test_NAME.c.  Those of lib/ and hotplug/ link only those.
# (test_sandbox tests hotplug/privsep/sandbox.c, which is memgrantd's: it links the agent's)
UNIT_SRC_HOTPLUG := $(filter-out tests/unit/hotplug/privsep/test_sandbox.c,\
	$(shell find tests/unit/hotplug tests/unit/lib -name 'test_*.c' 2>/dev/null | sort))
# memgrant-host's tests link its objects and libvirt: built only with libvirt
UNIT_SRC_HOST := $(shell find tests/unit/providers/host -name 'test_*.c' 2>/dev/null | sort)
UNIT_SRC_AGENT := $(filter-out $(UNIT_SRC_HOTPLUG) $(UNIT_SRC_HOST),$(shell find tests/unit -name 'test_*.c' | sort))
unit_bin = $(patsubst %.c,$(B)/tests/%,$(notdir $(1)))
UNIT_HOTPLUG := $(call unit_bin,$(UNIT_SRC_HOTPLUG))
UNIT_AGENT := $(call unit_bin,$(UNIT_SRC_AGENT)) $(if $(filter 1,$(HAVE_LIBVIRT)),$(call unit_bin,$(UNIT_SRC_HOST)))
TEST_TOOLS := $(patsubst tests/tools/%.c,$(B)/tests/tools/%,$(wildcard tests/tools/*.c))
# LD_PRELOAD layers for tests (tests/tools/preload/): no sanitizer, no project code
TEST_PRELOADS := $(patsubst tests/tools/preload/%.c,$(B)/tests/tools/%.so,$(wildcard tests/tools/preload/*.c))

# the fuzz harnesses, each run over its seed corpus by tests/fuzz_corpus.sh
# without libFuzzer (tests/fuzz/replay.c); their sources besides the archives
# are on the harness's " * Sources:" line.  memgrant-host's need libvirt.
FUZZ_HARNESSES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_HARNESSES := $(if $(filter 1,$(HAVE_LIBVIRT)),$(FUZZ_HARNESSES),$(filter-out host_%,$(FUZZ_HARNESSES)))
FUZZ_REPLAY := $(patsubst %,$(B)/tests/fuzz/replay_%,$(FUZZ_HARNESSES))
fuzz_sources = $(shell sed -n 's/^ \* Sources: //p' tests/fuzz/fuzz_$(1).c)
ifeq ($(ONLY),hotplug)
PROGRAMS :=
UNIT := $(UNIT_HOTPLUG)
else
PROGRAMS := $(B)/memgrantd $(B)/memgrant-helper $(B)/memgrantctl $(if $(and $(filter 1,$(HAVE_LIBVIRT)),$(HOST_SRC)),$(B)/memgrant-host)
UNIT := $(UNIT_HOTPLUG) $(UNIT_AGENT)
endif

.PHONY: all programs check check-vm check-libvirt check-s390-kernel check-unit check-hotplug demo install clean distclean deps bench
all: $(PROGRAMS) $(UNIT) $(if $(PROGRAMS),$(TEST_TOOLS) $(TEST_PRELOADS) $(FUZZ_REPLAY))
# what `make install` installs, without the tests (the packages build this)
programs: $(PROGRAMS)

# --- compile -----------------------------------------------------------------
$(B)/%.o: %.c config.mk
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(AGENT_CFLAGS_$(firstword $(subst /, ,$*))) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS_$(firstword $(subst /, ,$*))) -MMD -MP -c -o $@ $<

AGENT_CFLAGS_agent = $(AGENT_CFLAGS)
AGENT_CFLAGS_config = $(AGENT_CFLAGS)
AGENT_CFLAGS_providers = $(AGENT_CFLAGS) $(LIBVIRT_CFLAGS)
AGENT_CFLAGS_tests = $(AGENT_CFLAGS)
AGENT_CFLAGS_bench = $(AGENT_CFLAGS)
CMOCKA_CFLAGS_tests = $(CMOCKA_CFLAGS)

$(CTL_LIB): $(patsubst %.c,$(B)/%.o,$(filter-out agent/ctl/ctl.c,$(CTL_SRC)))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(MG_LIB): $(patsubst %.c,$(B)/%.o,$(LIB_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(WIRE_LIB): $(patsubst %.c,$(B)/%.o,$(WIRE_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(HOTPLUG_LIB): $(patsubst %.c,$(B)/%.o,$(HOTPLUG_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(AGENT_LIB): $(patsubst %.c,$(B)/%.o,$(CONFIG_SRC) $(AGENT_SRC) $(PRIVSEP_AGENT_SRC) $(PROVIDERS_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(B)/memgrantd: $(B)/agent/memgrantd.o $(AGENT_LIB) $(WIRE_LIB) $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(AGENT_LIBS)

# the privileged helper memgrantd starts (hotplug/privsep/spawn.h): hotplug
# writes only, without the libraries that parse outside input
$(B)/memgrant-helper: $(B)/hotplug/privsep/main.o $(B)/hotplug/privsep/sandbox.o $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SECCOMP_LIBS) $(JANSSON_LIBS)

$(B)/memgrantctl: $(B)/agent/ctl/ctl.o $(CTL_LIB) $(AGENT_LIB) $(WIRE_LIB) $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(AGENT_LIBS)

# memgrant-host reads the domain XML with libxml2 (a dependency of libvirt).
# configure finds it (in the target root when cross-compiling); a config.mk
# written by an older configure falls back to the build machine's pkg-config.
ifeq ($(origin HAVE_FUSE3),undefined)
XML_CFLAGS := $(if $(filter 1,$(HAVE_LIBVIRT)),$(shell pkg-config --cflags libxml-2.0 2>/dev/null))
XML_LIBS := $(if $(filter 1,$(HAVE_LIBVIRT)),$(shell pkg-config --libs libxml-2.0 2>/dev/null))
HAVE_FUSE3 := $(shell pkg-config --exists fuse3 2>/dev/null && echo 1)
FUSE3_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE3_LIBS := $(shell pkg-config --libs fuse3 2>/dev/null)
endif
HOST_XML_CFLAGS := $(XML_CFLAGS)
HOST_XML_LIBS := $(XML_LIBS)
$(B)/providers/host/%.o: ALL_CFLAGS += $(HOST_XML_CFLAGS)

HOST_LIB := $(B)/libhost.a
$(HOST_LIB): $(patsubst %.c,$(B)/%.o,$(filter-out providers/host/cli/host.c,$(HOST_SRC)))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# a program of its own: the wire vocabulary and lib/, nothing of memgrantd
$(B)/memgrant-host: $(patsubst %.c,$(B)/%.o,$(HOST_SRC)) $(WIRE_LIB) $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBVIRT_LIBS) $(HOST_XML_LIBS) $(YAML_LIBS) $(JANSSON_LIBS) -lpthread

define unit_rule
$(call unit_bin,$(1)): $(patsubst %.c,$(B)/%.o,$(1)) $(2)
	@$$(if $$(Q),echo "  LD      $$@")
	$$(Q)$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ $(3) $$(CMOCKA_LIBS)
endef
$(foreach t,$(UNIT_SRC_HOTPLUG),$(eval $(call unit_rule,$(t),$$(WIRE_LIB) $$(HOTPLUG_LIB) $$(MG_LIB),$$(JANSSON_LIBS))))
$(foreach t,$(UNIT_SRC_AGENT),$(eval $(call unit_rule,$(t),$$(CTL_LIB) $$(AGENT_LIB) $$(WIRE_LIB) $$(HOTPLUG_LIB) $$(MG_LIB),$$(AGENT_LIBS))))
$(foreach t,$(UNIT_SRC_HOST),$(eval $(call unit_rule,$(t),$$(HOST_LIB) $$(AGENT_LIB) $$(WIRE_LIB) $$(HOTPLUG_LIB) $$(MG_LIB),$$(LIBVIRT_LIBS) $$(HOST_XML_LIBS) $$(AGENT_LIBS))))

define fuzz_rule
$(B)/tests/fuzz/replay_$(1): $(B)/tests/fuzz/fuzz_$(1).o $(B)/tests/fuzz/replay.o $(patsubst %.c,$(B)/%.o,$(call fuzz_sources,$(1))) $$(WIRE_LIB) $$(HOTPLUG_LIB) $$(MG_LIB)
	@$$(if $$(Q),echo "  LD      $$@")
	$$(Q)$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ $$(AGENT_LIBS)
endef
$(foreach h,$(FUZZ_HARNESSES),$(eval $(call fuzz_rule,$(h))))

# tests/tools: libfuse3 for simfs (a stub that exits 77 without it)
TOOLS_CFLAGS := $(FUSE3_CFLAGS) $(if $(filter 1,$(HAVE_FUSE3)),-DHAVE_FUSE3)
TOOLS_LIBS := $(FUSE3_LIBS)
$(B)/tests/tools/%.o: ALL_CFLAGS += $(TOOLS_CFLAGS)
# the rule suite on a real kernel (tests/s390/) runs rules.h's cmocka cases
$(B)/tests/tools/kernel_rules: TOOLS_LIBS += $(CMOCKA_LIBS)

$(B)/tests/tools/%: $(B)/tests/tools/%.o $(AGENT_LIB) $(WIRE_LIB) $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(AGENT_LIBS) $(TOOLS_LIBS)

$(B)/tests/tools/%.so: tests/tools/preload/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) -fPIC -shared $(LDFLAGS) -o $@ $< -ldl

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# --- dependencies --------------------------------------------------------------
# make demo / make check install the Debian build dependencies when one is missing.
deps:
	@packaging/install-deps.sh --if-missing

# --- tests ---------------------------------------------------------------------
# TEST_WRAPPER runs each test binary (qemu-s390x-static for cross builds).
check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(B) TEST_WRAPPER="$(TEST_WRAPPER)" tests/run.sh tests/include_check.sh tests/truth_check.sh $(if $(PROGRAMS),tests/fuzz_corpus.sh tests/dead_check.sh) $(UNIT) $(if $(PROGRAMS),$(filter-out tests/integration/lib.sh,$(wildcard tests/integration/*.sh)))

# benchmarks, not part of check: bench/run.sh prints each figure against its
# reference and writes $(B)/bench/summary.json (docs/performance.md)
bench: all bench-bin
	$(Q)BUILD=$(B) sh bench/run.sh

# a real kernel under QEMU (TCG): tests/vm/run.sh, docs/vm-test.md
check-vm: all
	$(Q)BUILD=$(B) tests/vm/run.sh

# the autoscaling loop (memgrant-host serve) on libvirt's QEMU driver under
# TCG; exits 77 (skip) without libvirtd, QEMU or the kernel package
check-libvirt: all
	$(Q)BUILD=$(B) tests/vm/libvirt.sh

# memgrant on the real s390x kernel (sclp_mem.c) of the kit in ../shared/s390-kernel,
# under its QEMU (TCG); needs an s390x build (.ci/s390x.sh); exits 77 (skip)
# without the kit: tests/s390/run.sh, docs/vm-test.md
check-s390-kernel: all
	$(Q)BUILD=$(B) tests/s390/run.sh

check-unit: $(UNIT)
	$(Q)BUILD=$(B) TEST_WRAPPER="$(TEST_WRAPPER)" tests/run.sh $(UNIT)

check-hotplug: $(UNIT_HOTPLUG)
	$(Q)BUILD=$(B) TEST_WRAPPER="$(TEST_WRAPPER)" tests/run.sh $(UNIT_HOTPLUG)

demo: deps
	$(Q)$(MAKE) --no-print-directory -s all
	$(Q)BUILD=$(B) tests/demo.sh

# --- install -------------------------------------------------------------------
include docs/man/man.mk
include packaging/install.mk

install: $(PROGRAMS) install-man install-service install-doc
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(SYSCONFDIR)/memgrant
	install -m 0755 $(B)/memgrantd $(DESTDIR)$(SBINDIR)/memgrantd
	install -m 0755 $(B)/memgrant-helper $(DESTDIR)$(SBINDIR)/memgrant-helper
	install -m 0755 $(B)/memgrantctl $(DESTDIR)$(BINDIR)/memgrantctl
	$(if $(filter 1,$(HAVE_LIBVIRT)),install -m 0755 $(B)/memgrant-host $(DESTDIR)$(BINDIR)/memgrant-host)
	install -m 0644 config/memgrant.yaml $(DESTDIR)$(SYSCONFDIR)/memgrant/memgrant.yaml

clean:
	rm -rf $(B)

distclean: clean
	rm -f config.mk

# --- benchmarks (figures, not tests): build/bench/* -----------------------------
BENCH_HOST := bench/autoscale.c bench/serve_scale.c
BENCH_BIN := $(patsubst bench/%.c,$(B)/bench/%,$(if $(filter 1,$(HAVE_LIBVIRT)),$(wildcard bench/*.c),$(filter-out $(BENCH_HOST),$(wildcard bench/*.c))))
bench-bin: $(BENCH_BIN)
# bench/autoscale runs memgrant-host serve's control law, bench/serve_scale
# its controller and reports (libhost.a)
$(patsubst bench/%.c,$(B)/bench/%,$(BENCH_HOST)): $(B)/bench/%: $(B)/bench/%.o $(HOST_LIB) $(AGENT_LIB) $(WIRE_LIB) $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBVIRT_LIBS) $(HOST_XML_LIBS) $(AGENT_LIBS)
$(B)/bench/%: $(B)/bench/%.o $(HOTPLUG_LIB) $(MG_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(JANSSON_LIBS) -lpthread
