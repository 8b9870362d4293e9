# Consumer programs (tests/progs) and the GPU benchmark (tests/gpu/bench.c); included by ../../Makefile.
#   make testbins                 -> $(BUILD)/progs/*, linked against the fakes in $(BUILD)/fake (CI; no
#                                    rpath: tests set LD_LIBRARY_PATH=$(BUILD)/fake)
#   make progs-real NCCL_LIB=dir CUDA_LIB=dir
#                                 -> $(BUILD)/progs-real/*, linked against the real libnccl.so.2 and
#                                    libcudart (RUNPATH set to those directories); used by tests/gpu/run
# Headers: NCCL_INCLUDE (nccl.h) and CUDA_INCLUDE (cuda_runtime.h) from the top Makefile.

PROGS_SRCDIR := tests/progs
PROGS_HDR := $(wildcard $(PROGS_SRCDIR)/*.h)
PROGS_COMMON := $(PROGS_SRCDIR)/common.c
NGTEST_SRC := $(addprefix $(PROGS_SRCDIR)/,ngtest.c launch.c scenario.c common.c)
PROGS_NAMES := ngtest libconsumer.so dlopen_local fork_after soak bench devcomm_then_bad preflight_cases faults two_nccl \
  wrongdata twocomm orders manycomm explore failwalk repeat dlsym_handle libnextprobe.so memalloc \
  libnotready.so libtracer.so libfphook.so cpubench
PROGS_CFLAGS = $(ALL_CFLAGS) -I$(PROGS_SRCDIR) $(if $(NCCL_INCLUDE),-I$(NCCL_INCLUDE)) $(if $(CUDA_INCLUDE),-I$(CUDA_INCLUDE))

# Linked by soname file name, so no libnccl.so / libcudart.so development links are needed.
PROGS_FAKE_DEPS = $(BUILD)/fake/libnccl.so.2 $(BUILD)/fake/libcudart.so.13
PROGS_FAKE_LINK = -L$(BUILD)/fake -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath-link,$(BUILD)/fake

NCCL_LIB ?= $(firstword $(foreach d,/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /usr/lib64,$(if $(wildcard $(d)/libnccl.so.2),$(d))))
CUDA_LIB ?= $(firstword $(foreach d,/usr/local/cuda/lib64 /usr/local/cuda/lib,$(if $(wildcard $(d)/libcudart.so*),$(d))))
PROGS_REAL_NCCL = $(firstword $(wildcard $(NCCL_LIB)/libnccl.so.2 $(NCCL_LIB)/libnccl.so))
PROGS_REAL_CUDART = $(firstword $(wildcard $(CUDA_LIB)/libcudart.so $(CUDA_LIB)/libcudart.so.[0-9]*))
PROGS_REAL_LINK = $(PROGS_REAL_NCCL) $(PROGS_REAL_CUDART) -Wl,-rpath,$(NCCL_LIB):$(CUDA_LIB)

# progs_rules(output dir, link flags, prerequisites)
define progs_rules
$(1)/ngtest: $(NGTEST_SRC) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(NGTEST_SRC) $(2) -ldl -lpthread
$(1)/libconsumer.so: $(PROGS_SRCDIR)/consumer.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -shared -o $$@ $(PROGS_SRCDIR)/consumer.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/dlopen_local: $(PROGS_SRCDIR)/dlopen_local.c
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/dlopen_local.c -ldl
$(1)/fork_after: $(PROGS_SRCDIR)/fork_after.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/fork_after.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/soak: $(PROGS_SRCDIR)/soak.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/soak.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/preflight_cases: $(PROGS_SRCDIR)/preflight_cases.c $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/preflight_cases.c $(2)
$(1)/faults: $(PROGS_SRCDIR)/faults.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/faults.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/wrongdata: $(PROGS_SRCDIR)/wrongdata.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/wrongdata.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/twocomm: $(PROGS_SRCDIR)/twocomm.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/twocomm.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/orders: $(PROGS_SRCDIR)/orders.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/orders.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/repeat: $(PROGS_SRCDIR)/repeat.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/repeat.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/explore: $(PROGS_SRCDIR)/explore.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/explore.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/failwalk: $(PROGS_SRCDIR)/failwalk.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/failwalk.c $(PROGS_COMMON) $(2) -ldl -lpthread -Wl,--export-dynamic-symbol=ng_failpoint_hook
$(1)/manycomm: $(PROGS_SRCDIR)/manycomm.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/manycomm.c $(PROGS_COMMON) $(2) -ldl -lpthread
$(1)/two_nccl: $(PROGS_SRCDIR)/two_nccl.c
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/two_nccl.c -ldl
$(1)/libnextprobe.so: $(PROGS_SRCDIR)/nextprobe.c $(PROGS_SRCDIR)/nextprobe.map
	@mkdir -p $$(@D)
	$$(CC) $$(PROGS_CFLAGS) -shared -Wl,--version-script=$(PROGS_SRCDIR)/nextprobe.map -o $$@ $(PROGS_SRCDIR)/nextprobe.c -ldl
$(1)/libtracer.so: $(PROGS_SRCDIR)/tracer.c
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -shared -o $$@ $(PROGS_SRCDIR)/tracer.c -ldl
$(1)/libfphook.so: $(PROGS_SRCDIR)/fphook.c
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -shared -o $$@ $(PROGS_SRCDIR)/fphook.c
$(1)/libnotready.so: $(PROGS_SRCDIR)/notready.c
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -shared -o $$@ $(PROGS_SRCDIR)/notready.c -ldl
$(1)/dlsym_handle: $(PROGS_SRCDIR)/dlsym_handle.c $(1)/libnextprobe.so
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/dlsym_handle.c -L$(1) -l:libnextprobe.so -Wl,-rpath,'$$$$ORIGIN' -ldl
$(1)/devcomm_then_bad: $(PROGS_SRCDIR)/devcomm_then_bad.c $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/devcomm_then_bad.c $(2) -ldl
$(1)/memalloc: $(PROGS_SRCDIR)/memalloc.c $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ $(PROGS_SRCDIR)/memalloc.c $(2)
$(1)/cpubench: tests/bench/cpubench.c $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ tests/bench/cpubench.c -Wl,--no-as-needed $(2) -ldl
$(1)/bench: tests/gpu/bench.c $(PROGS_COMMON) $(PROGS_HDR) $(3)
	@mkdir -p $$(@D)
	$$(call ng_deps,$$(CC) $$(PROGS_CFLAGS),$$^)
	$$(CC) $$(PROGS_CFLAGS) -o $$@ tests/gpu/bench.c $(PROGS_COMMON) $(2) -ldl -lpthread
endef

# libconsumer.so linked against the other fake libnccl (soname libnccl-other.so.2, RUNPATH to it): a library
# whose NCCL is a second copy (tests/t_dlsym.sh)
$(BUILD)/progs/libconsumer_other.so: $(PROGS_SRCDIR)/consumer.c $(PROGS_COMMON) $(PROGS_HDR) $(BUILD)/fake-other/libnccl-other.so.2 $(BUILD)/fake/libcudart.so.13
	@mkdir -p $(@D)
	$(CC) $(PROGS_CFLAGS) -shared -o $@ $(PROGS_SRCDIR)/consumer.c $(PROGS_COMMON) -L$(BUILD)/fake-other -l:libnccl-other.so.2 \
	  -L$(BUILD)/fake -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN/../fake-other' -Wl,-rpath-link,$(BUILD)/fake -ldl -lpthread
testbins: $(BUILD)/progs/libconsumer_other.so
# feature detection by every route (tests/t_dlsym.sh): one build that loads libnccl itself, one linked against it
# with weak references (run against the fake of each release, $(BUILD)/fake-rel/CODE)
$(BUILD)/progs/featroutes: $(PROGS_SRCDIR)/featroutes.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< -ldl
$(BUILD)/progs/featroutes_linked: $(PROGS_SRCDIR)/featroutes.c $(BUILD)/fake/libnccl.so.2
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DFEAT_LINKED -o $@ $< -Wl,--no-as-needed -L$(BUILD)/fake -l:libnccl.so.2 -Wl,--as-needed \
	  -Wl,-rpath-link,$(BUILD)/fake -ldl
testbins: $(BUILD)/progs/featroutes $(BUILD)/progs/featroutes_linked
# another dlsym interposer (tests/t_dlsym.sh)
$(BUILD)/progs/libdlspy.so: $(PROGS_SRCDIR)/dlspy.c
	@mkdir -p $(@D)
	$(CC) $(PROGS_CFLAGS) -shared -o $@ $(PROGS_SRCDIR)/dlspy.c -ldl
testbins: $(BUILD)/progs/libdlspy.so

$(eval $(call progs_rules,$(BUILD)/progs,$(PROGS_FAKE_LINK),$(PROGS_FAKE_DEPS)))
$(eval $(call progs_rules,$(BUILD)/progs-real,$(PROGS_REAL_LINK),progs-real-check))

.PHONY: testbins progs-real progs-real-check
testbins: $(addprefix $(BUILD)/progs/,$(PROGS_NAMES))
progs-real: $(addprefix $(BUILD)/progs-real/,$(PROGS_NAMES))
progs-real-check:
	@test -n "$(PROGS_REAL_NCCL)" || { echo "progs-real: no libnccl.so.2 in NCCL_LIB='$(NCCL_LIB)'" >&2; exit 1; }
	@test -n "$(PROGS_REAL_CUDART)" || { echo "progs-real: no libcudart.so* in CUDA_LIB='$(CUDA_LIB)'" >&2; exit 1; }
	@test -n "$(CUDA_INCLUDE)" || { echo "progs-real: cuda_runtime.h not found; set CUDA_INCLUDE=dir" >&2; exit 1; }

# The header-free scenario programs (tests/progs/ngapi.h): the same sources built with no NCCL or CUDA
# header (shim/nccl_abi.h instead), libnccl and libcuda.so.1 opened at run time; nothing linked but libc.
# What ncclguard-doctor --probe runs and tests/gpu/run runs; installed into libexec/ncclguard and carried
# by the wheel. Built with the tools (make, make tools), into $(BUILD)/probe/.
PROBE_DIR = $(BUILD)/probe
PROBE_NAMES = ngtest repeat faults
PROBE_PROGS = $(addprefix $(PROBE_DIR)/,$(PROBE_NAMES))
PROBE_CFLAGS = $(ALL_CFLAGS) -DNG_HEADERFREE -I$(PROGS_SRCDIR) -Ishim
PROBE_API = $(PROGS_SRCDIR)/ngapi.c
$(PROBE_DIR)/ngtest: $(NGTEST_SRC) $(PROBE_API) $(PROGS_HDR) shim/nccl_abi.h
	@mkdir -p $(@D)
	$(call ng_deps,$(CC) $(PROBE_CFLAGS),$(NGTEST_SRC) $(PROBE_API))
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(PROBE_CFLAGS) -o $@ $(NGTEST_SRC) $(PROBE_API) -ldl -lpthread
$(PROBE_DIR)/repeat: $(PROGS_SRCDIR)/repeat.c $(PROGS_COMMON) $(PROBE_API) $(PROGS_HDR) shim/nccl_abi.h
	@mkdir -p $(@D)
	$(call ng_deps,$(CC) $(PROBE_CFLAGS),$(PROGS_SRCDIR)/repeat.c $(PROGS_COMMON) $(PROBE_API))
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(PROBE_CFLAGS) -o $@ $(PROGS_SRCDIR)/repeat.c $(PROGS_COMMON) $(PROBE_API) -ldl -lpthread
$(PROBE_DIR)/faults: $(PROGS_SRCDIR)/faults.c $(PROGS_COMMON) $(PROBE_API) $(PROGS_HDR) shim/nccl_abi.h
	@mkdir -p $(@D)
	$(call ng_deps,$(CC) $(PROBE_CFLAGS),$(PROGS_SRCDIR)/faults.c $(PROGS_COMMON) $(PROBE_API))
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(PROBE_CFLAGS) -o $@ $(PROGS_SRCDIR)/faults.c $(PROGS_COMMON) $(PROBE_API) -ldl -lpthread
# the PyTorch scenario script (tests/gpu/torch_symm.py), beside them
PROBE_DATA = $(PROBE_DIR)/torch_symm.py
$(PROBE_DIR)/torch_symm.py: tests/gpu/torch_symm.py
	@mkdir -p $(@D)
	$(Q)cp -f $< $@
.PHONY: probe
probe: $(PROBE_PROGS) $(PROBE_DATA)
