# rdmach - GNU Make.  `make` builds the library, tools, tests and benchmarks;
# `make check` runs the test suite; `make bench` the benchmarks.
# BUILD=asan builds everything with AddressSanitizer + UBSan in build-asan/.

# channel/build-mpich.sh reads MPICH_SRC and PREFIX (MPICH's prefix) from
# the environment: keep the environment's values, which config.mk's
# assignments would hide (a command-line value beats config.mk anyway).
MPICH_ENV_SRC := $(if $(filter environment%,$(origin MPICH_SRC)),$(MPICH_SRC))
MPICH_ENV_PREFIX := $(if $(filter environment%,$(origin PREFIX)),$(PREFIX))

ifeq ($(wildcard config.mk),)
$(shell ./configure >/dev/null)
endif
include config.mk

# Install directories (./configure --prefix, --bindir, --libdir,
# --includedir; `make install PREFIX=... DESTDIR=...`); the defaults
# follow PREFIX, also when it is given on make's command line.
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

BUILD ?= release
ifeq ($(BUILD),asan)
O := build-asan
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT := -O1
else
O := build
SAN :=
OPT := -O2
endif

CFLAGS := $(OPT) -g -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
	-fPIC -fvisibility=hidden -pthread -Iinclude -I. $(SAN) \
	$(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SAN)
LIBS :=

# The library, by layer: each directory includes only from those before it
# (test/check-layers.sh): include <- core <- proto, mem, pmi <- transports.
# channel/ch3_knobs.c is the CH3 channel's knob table, listed and checked
# by the library (the channel itself is built inside MPICH).
LIB_SRCS := $(wildcard core/*.c proto/*.c mem/*.c pmi/*.c rdma_shm/*.c) \
	channel/ch3_knobs.c
ifeq ($(HAVE_IB),1)
CFLAGS += -DRDMACH_HAVE_IB
LIB_SRCS += $(wildcard rdma_ib/*.c)
LIBS += -libverbs
endif
LIB_OBJS := $(LIB_SRCS:%.c=$(O)/obj/%.o)
LIB := $(O)/lib/librdmach.a
# Library version: the major is RDMACH_API_VERSION (include/rdmach.h) and
# names the soname (librdmach.so.1); minor.patch are set here.
SOMAJOR := $(shell sed -n 's/^\#define RDMACH_API_VERSION \([0-9][0-9]*\).*/\1/p' include/rdmach.h)
VERSION := $(SOMAJOR).5.0
SONAME := librdmach.so.$(SOMAJOR)
SOLIB_REAL := $(O)/lib/librdmach.so.$(VERSION)
SOLIB := $(O)/lib/librdmach.so

TOOL_SRCS := $(wildcard tools/*.c)
TEST_LIB_SRCS := $(wildcard test/lib/*.c)
TEST_SRCS := $(wildcard test/test_*.c)
BENCH_SRCS := $(wildcard bench/src/rdmach_*.c bench/src/raw_*.c)
MPI_BENCH_SRCS := $(wildcard bench/src/mpi_*.c)

# cross-host test programs (test/run-cluster.sh)
XHOST_SRCS := $(wildcard test/vm/xhost_*.c)

TOOLS := $(TOOL_SRCS:tools/%.c=$(O)/bin/%)
TESTS := $(TEST_SRCS:test/%.c=$(O)/test/%) $(XHOST_SRCS:test/%.c=$(O)/test/%)
BENCHES := $(BENCH_SRCS:bench/src/%.c=$(O)/bin/%)
TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(O)/obj/%.o)

all: $(LIB) $(SOLIB) $(O)/lib/$(SONAME) $(TOOLS) $(TESTS) $(BENCHES)

$(O)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The static library holds one relocatable object: a program that links
# any of its symbols gets all of it, so transports and knob tables, which
# register themselves in linker sections (core/tl.h, core/knob.h) rather
# than being named by the core, are always there.
$(O)/obj/rdmach.o: $(LIB_OBJS)
	$(LD) -r -o $@ $^

$(LIB): $(O)/obj/rdmach.o
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(SOLIB_REAL): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDFLAGS) $(LIBS)

# librdmach.so.1 (what programs load) and librdmach.so (what -lrdmach finds)
$(SOLIB) $(O)/lib/$(SONAME): $(SOLIB_REAL)
	ln -sf $(<F) $@

$(O)/obj/tools/%.o: CFLAGS += -DRDMACH_VERSION='"$(VERSION)"'

$(O)/bin/%: $(O)/obj/tools/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(LIB) $(LDFLAGS) $(LIBS)

$(O)/bin/%: $(O)/obj/bench/src/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(LIB) $(LDFLAGS) $(LIBS) -lm

$(O)/test/%: $(O)/obj/test/%.o $(TEST_LIB_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(TEST_LIB_OBJS) $(LIB) $(LDFLAGS) $(LIBS) -lm

$(O)/obj/test/vm/%.o: CFLAGS += -Itest

# MPI benchmarks, built with the mpicc that configure found (Debian's MPICH
# by default) or MPICC=... (e.g. the one `make mpich` installed).
mpi-bench: $(MPI_BENCH_SRCS)
	@test -n "$(MPICC)" || { echo "no mpicc: apt-get install libmpich-dev" >&2; exit 1; }
	@mkdir -p $(O)/mpi
	for s in $(MPI_BENCH_SRCS); do \
		$(MPICC) -O2 -Wall -Wextra -Werror -o $(O)/mpi/$$(basename $$s .c) $$s || exit 1; done

# MPICH built from its own source with the CH3 channel "rdma" (channel/),
# installed into build/mpich-install: see channel/build-mpich.sh.
# MPICH_SRC: make's command line, else the environment, else ./configure
# --with-mpich-src; PREFIX only from the environment (rdmach's own PREFIX
# is not MPICH's).  MPICH_STEPS="fetch ..." runs only those steps.
mpich: $(LIB)
	env -u PREFIX $(if $(MPICH_ENV_PREFIX),PREFIX='$(MPICH_ENV_PREFIX)') \
		MPICH_SRC='$(or $(MPICH_ENV_SRC),$(MPICH_SRC))' \
		RDMACH_BUILD=$(abspath $(O)) channel/build-mpich.sh $(MPICH_STEPS)

# One MPICH release with ch3:rdma, built into build/mpich-VERSION-install,
# and its checks (MPI programs, CI subset, the rma directory at 4
# processes): `make check-mpich VERSION=4.3.2` (VERSION 4.0.2 is Debian's
# source package; others $(MPICH_TARBALLS)/mpich-VERSION.tar.gz) or
# MPICH_SRC=tarball-or-tree.  VERSION only from the command line, where it
# names MPICH's version (rdmach's own stays for everything else built).
MPICH_CHECK_SRC := $(if $(filter command environment%,$(firstword $(origin MPICH_SRC))),$(MPICH_SRC))
check-mpich: $(LIB)
	MPICH_SRC='$(MPICH_CHECK_SRC)' RDMACH_BUILD=$(abspath $(O)) \
		$(if $(MPICH_TARBALLS),MPICH_TARBALLS='$(MPICH_TARBALLS)') \
		channel/check-mpich.sh $(if $(filter command,$(firstword $(origin VERSION))),$(VERSION))

# ./configure --prefix=DIR && make && make install: the library
# (librdmach.a; librdmach.so.$(VERSION) with the soname and dev symlinks),
# the public headers, lib/pkgconfig/rdmach.pc, and the programs rdmach_run,
# rdmach_info, rdmach_latency, rdmach_bw (linked with librdmach.a: they
# need no library path).  Every file, and every directory that did not
# exist before, is listed in $(MANIFEST); `make uninstall` removes exactly
# those (without it, the files this configuration would install).
INSTALL_BINS := $(TOOLS) $(O)/bin/rdmach_latency $(O)/bin/rdmach_bw
INSTALL_HEADERS := include/rdmach.h include/rdmach_pmi.h include/rdmach_launch.h
INSTALLED := $(addprefix $(BINDIR)/,$(notdir $(INSTALL_BINS))) \
	$(addprefix $(LIBDIR)/,librdmach.a $(notdir $(SOLIB_REAL)) $(SONAME) librdmach.so) \
	$(addprefix $(INCLUDEDIR)/,$(notdir $(INSTALL_HEADERS))) $(PKGCONFIGDIR)/rdmach.pc
MANIFEST := $(O)/install-manifest.txt
# rdmach.pc: directories under the prefix relative to ${prefix}
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

# sh functions of the install recipe: mkdirs DIR, put MODE DIR FILE...,
# link TARGET PATH; each records what it created in the manifest ($$m).
INSTALL_SH = set -e; m='$(MANIFEST)'; \
	mkdirs() { [ -d "$$1" ] && return 0; mkdirs "$$(dirname "$$1")"; \
		mkdir "$$1"; echo "$$1" >>"$$m"; }; \
	put() { mode=$$1; dir=$$2; shift 2; mkdirs "$$dir"; for f; do \
		echo "install -m $$mode $$f $$dir/"; install -m "$$mode" "$$f" "$$dir/"; \
		echo "$$dir/$$(basename "$$f")" >>"$$m"; done; }; \
	link() { mkdirs "$$(dirname "$$2")"; echo "ln -sfn $$1 $$2"; \
		ln -sfn "$$1" "$$2"; echo "$$2" >>"$$m"; }

install: $(LIB) $(SOLIB_REAL) $(INSTALL_BINS) rdmach.pc.in
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(call pc_dir,$(LIBDIR))|' \
	    -e 's|@includedir@|$(call pc_dir,$(INCLUDEDIR))|' -e 's|@version@|$(VERSION)|' \
	    -e 's|@requires_private@|$(if $(filter 1,$(HAVE_IB)),$(IBVERBS_PC))|' \
	    -e 's|@libs_private@|$(strip $(LIBS) -pthread)|' -e '/^[A-Za-z.]*: *$$/d' \
	    rdmach.pc.in >$(O)/rdmach.pc
	@$(INSTALL_SH); \
	put 755 '$(DESTDIR)$(BINDIR)' $(INSTALL_BINS); \
	put 644 '$(DESTDIR)$(LIBDIR)' $(LIB) $(SOLIB_REAL); \
	link $(notdir $(SOLIB_REAL)) '$(DESTDIR)$(LIBDIR)/$(SONAME)'; \
	link $(SONAME) '$(DESTDIR)$(LIBDIR)/librdmach.so'; \
	put 644 '$(DESTDIR)$(INCLUDEDIR)' $(INSTALL_HEADERS); \
	put 644 '$(DESTDIR)$(PKGCONFIGDIR)' $(O)/rdmach.pc; \
	LC_ALL=C sort -u "$$m" -o "$$m"; \
	echo "installed into $(DESTDIR)$(PREFIX) (list: $$m); programs outside the"; \
	echo "tree: PKG_CONFIG_PATH=$(PKGCONFIGDIR) cc prog.c \$$(pkg-config --cflags --libs rdmach)"

uninstall:
	@m='$(MANIFEST)'; \
	if [ -f "$$m" ]; then LC_ALL=C sort -ru "$$m"; else \
		echo "uninstall: no $$m: removing what this configuration installs" >&2; \
		printf '%s\n' $(addprefix '$(DESTDIR),$(addsuffix ',$(INSTALLED))); fi | \
	while IFS= read -r p; do \
		if [ -d "$$p" ] && [ ! -L "$$p" ]; then \
			rmdir "$$p" 2>/dev/null && echo "rmdir $$p" || echo "kept $$p (not empty)"; \
		elif [ -e "$$p" ] || [ -L "$$p" ]; then echo "rm $$p"; rm -f "$$p"; fi; \
	done; rm -f "$$m"

# The NAS Parallel Benchmarks on this MPICH and the others of the machine,
# side by side: nas/run-nas.sh (see nas/README.md).  Passes NPB_SRC, CLASS,
# NP, BENCH, MPI, ROUNDS, TIME_LIMIT, OUT; RDMACH_STATS=1 adds the counters.
nas:
	NPB_SRC="$(NPB_SRC)" CLASS="$(CLASS)" NP="$(NP)" BENCH="$(BENCH)" MPI="$(MPI)" \
	ROUNDS="$(ROUNDS)" TIME_LIMIT="$(TIME_LIMIT)" OUT="$(OUT)" nas/run-nas.sh

check: all
	test/run-tests.sh

# Fuzzing with clang's libFuzzer, in build-fuzz/: each test/fuzz/fuzz_NAME.c
# is a harness, linked with the library sources it drives, built as they
# are (FUZZ_SRCS_fuzz_NAME; a new harness is a file there and a line here),
# seeded from test/fuzz/corpus/fuzz_NAME/.  `make fuzz FUZZ_TIME=60` runs
# each for that many seconds (test/fuzz/run-fuzz.sh; `make check` runs each
# for a few).
FUZZ_CC ?= clang
FUZZ_O := build-fuzz
FUZZ_TIME ?= 60
FUZZ_CFLAGS := -O1 -g -std=gnu11 -Wall -Wextra -Werror -Wshadow \
	-Wno-unused-parameter -pthread -Iinclude -I. -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-DRDMACH_FUZZ
FUZZ_SRCS_fuzz_pmi_reply := pmi/pmi.c pmi/pmi_wire.c core/knob.c core/log.c \
	core/num.c
FUZZ_SRCS_fuzz_oobval := core/oobval.c core/log.c core/num.c
FUZZ_SRCS_fuzz_knob := core/knob.c core/log.c core/num.c
FUZZ_SRCS_fuzz_num := core/num.c
# rdma_shm's receive side; -DRDMACH_FUZZ routes its loads of peer-written
# memory (rdma_shm/shm_peer.h) to the driver, test/fuzz/shm_fuzz.c
FUZZ_SHM_SRCS := test/fuzz/shm_fuzz.c rdma_shm/shm_ep.c rdma_shm/shm_pipe.c \
	rdma_shm/shm_rndv.c rdma_shm/shm_live.c rdma_shm/shm_conn.c \
	rdma_shm/shm_mem.c \
	core/iov.c core/log.c
FUZZ_SRCS_fuzz_shm_ring := $(FUZZ_SHM_SRCS)
FUZZ_SRCS_fuzz_shm_pipe := $(FUZZ_SHM_SRCS)
FUZZ_SRCS_fuzz_shm_rndv := $(FUZZ_SHM_SRCS)
# rdma_ib's readers of what the peer RDMA-writes, on plain memory; with
# -DRDMACH_FUZZ their loads of it (proto/peer.h) are counted per use
FUZZ_SRCS_fuzz_ib_ring := proto/ring.c test/fuzz/peer_count.c
FUZZ_SRCS_fuzz_ib_spipe := proto/spipe.c core/iov.c core/log.c \
	test/fuzz/peer_count.c
FUZZ_SRCS_fuzz_nodemap := core/nodemap.c core/num.c
# rdma_ib's out-of-band record and connection-manager messages (verbs-free)
FUZZ_SRCS_fuzz_ib_rec := rdma_ib/ib_rec.c core/num.c
FUZZ_SRCS_fuzz_ib_cm_msg := rdma_ib/ib_cm_msg.c
FUZZ_HARNESSES := $(patsubst test/fuzz/%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_BINS := $(FUZZ_HARNESSES:%=$(FUZZ_O)/%)
FUZZ_HDRS := $(wildcard include/*.h core/*.h pmi/*.h proto/*.h rdma_shm/*.h \
	rdma_ib/ib_rec.h rdma_ib/ib_cm_msg.h test/fuzz/*.h)

define FUZZ_RULE
$(FUZZ_O)/$(1): test/fuzz/$(1).c $(FUZZ_SRCS_$(1)) $(FUZZ_HDRS)
	@mkdir -p $$(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $$@ test/fuzz/$(1).c $(FUZZ_SRCS_$(1))
endef
$(foreach h,$(FUZZ_HARNESSES),$(eval $(call FUZZ_RULE,$(h))))

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	test/fuzz/run-fuzz.sh $(FUZZ_TIME) $(FUZZ_BINS)

# the whole cross-host suite in a cluster of Soft-RoCE VMs (test/vm/README.md)
check-cluster: all
	test/run-cluster.sh full

bench: all
	bench/host/run-shm.sh

# doc/knobs.md's knob table, generated from the knob tables in the sources
# (rdmach_info --markdown); test/check-knobs.sh fails when it is stale.
knobs-doc: $(O)/bin/rdmach_info
	tools/knobs-doc.sh $(O)

clean:
	rm -rf build build-asan build-fuzz

distclean: clean
	rm -f config.mk

.PHONY: all check check-mpich check-cluster bench knobs-doc clean distclean mpi-bench mpich nas \
	install uninstall fuzz fuzz-build
.SECONDARY:

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
