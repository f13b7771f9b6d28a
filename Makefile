# rdmach - GNU Make.  `make` builds the library, tools, tests and benchmarks;
# `make check` runs the test suite; `make bench` the benchmarks.
# BUILD=asan builds everything with AddressSanitizer + UBSan in build-asan/.

ifeq ($(wildcard config.mk),)
$(shell ./configure >/dev/null)
endif
include config.mk

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
	-fPIC -fvisibility=hidden -pthread -Iinclude -Icore -Iproto $(SAN) \
	$(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SAN)
LIBS :=

LIB_SRCS := $(wildcard core/*.c proto/*.c rdma_shm/*.c)
ifeq ($(HAVE_IB),1)
CFLAGS += -DRDMACH_HAVE_IB
LIB_SRCS += $(wildcard rdma_ib/*.c)
LIBS += -libverbs
endif
LIB_OBJS := $(LIB_SRCS:%.c=$(O)/obj/%.o)
LIB := $(O)/lib/librdmach.a
SOLIB := $(O)/lib/librdmach.so

TOOL_SRCS := $(wildcard tools/*.c)
TEST_LIB_SRCS := $(wildcard test/lib/*.c)
TEST_SRCS := $(wildcard test/test_*.c)
BENCH_SRCS := $(wildcard bench/rdmach_*.c bench/raw_*.c)
MPI_BENCH_SRCS := $(wildcard bench/mpi_*.c)

TOOLS := $(TOOL_SRCS:tools/%.c=$(O)/bin/%)
TESTS := $(TEST_SRCS:test/%.c=$(O)/test/%)
BENCHES := $(BENCH_SRCS:bench/%.c=$(O)/bin/%)
TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(O)/obj/%.o)

all: $(LIB) $(SOLIB) $(TOOLS) $(TESTS) $(BENCHES)

$(O)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(SOLIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LIBS)

$(O)/bin/%: $(O)/obj/tools/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(LIB) $(LDFLAGS) $(LIBS)

$(O)/bin/%: $(O)/obj/bench/%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(LIB) $(LDFLAGS) $(LIBS) -lm

$(O)/test/%: $(O)/obj/test/%.o $(TEST_LIB_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(TEST_LIB_OBJS) $(LIB) $(LDFLAGS) $(LIBS) -lm

# MPI benchmarks, built with the mpicc that configure found (Debian's MPICH
# by default) or MPICC=... (e.g. the one `make mpich` installed).
mpi-bench: $(MPI_BENCH_SRCS)
	@test -n "$(MPICC)" || { echo "no mpicc: apt-get install libmpich-dev" >&2; exit 1; }
	@mkdir -p $(O)/mpi
	for s in $(MPI_BENCH_SRCS); do \
		$(MPICC) -O2 -Wall -Wextra -Werror -o $(O)/mpi/$$(basename $$s .c) $$s || exit 1; done

# MPICH built from its own source with the CH3 channel "rdma" (channel/),
# installed into build/mpich-install: see channel/build-mpich.sh.
mpich: $(LIB)
	RDMACH_BUILD=$(abspath $(O)) channel/build-mpich.sh

# The NAS Parallel Benchmarks on this MPICH and the others of the machine,
# side by side: nas/run-nas.sh (see nas/README.md).  Passes NPB_SRC, CLASS,
# NP, BENCH, MPI, ROUNDS, TIME_LIMIT, OUT; RDMACH_STATS=1 adds the counters.
nas:
	NPB_SRC="$(NPB_SRC)" CLASS="$(CLASS)" NP="$(NP)" BENCH="$(BENCH)" MPI="$(MPI)" \
	ROUNDS="$(ROUNDS)" TIME_LIMIT="$(TIME_LIMIT)" OUT="$(OUT)" nas/run-nas.sh

check: all
	test/run-tests.sh

bench: all
	bench/run-shm.sh

clean:
	rm -rf build build-asan

distclean: clean
	rm -f config.mk

.PHONY: all check bench clean distclean mpi-bench mpich nas
.SECONDARY:

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
