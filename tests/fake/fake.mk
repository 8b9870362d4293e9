# Fake CUDA driver, runtime and NCCL for CI (tests/fake/README.md). Included by the top Makefile.
FAKE_DIR = $(BUILD)/fake
FAKE_LEGACY_DIR = $(BUILD)/fake-legacy
FAKE_CFLAGS = $(ALL_CFLAGS) -I$(CUDA_INCLUDE) -I$(NCCL_INCLUDE)
FAKE_CUDA_SRC = tests/fake/fake_cuda.c tests/fake/fake_cuda_mem.c tests/fake/fake_cuda_stream.c
FAKE_NCCL_SRC = tests/fake/nccl_core.c tests/fake/nccl_group.c tests/fake/nccl_comm.c tests/fake/nccl_reg.c \
  tests/fake/nccl_coll.c
FAKE_NCCL_HDR = tests/fake/fake_nccl.h tests/fake/fake_cuda_int.h
# the fakes' header dependencies beyond these lists are generated (-MMD)

FAKE_OUT = $(FAKE_DIR)/libcuda.so.1 $(FAKE_DIR)/libcuda.so $(FAKE_DIR)/libcudart.so.13 $(FAKE_DIR)/libcudart.so \
  $(FAKE_DIR)/libnvidia-ml.so.1 $(FAKE_LEGACY_DIR)/libnvidia-ml.so.1 \
  $(FAKE_DIR)/libnccl.so.2 $(FAKE_DIR)/libnccl.so \
  $(FAKE_LEGACY_DIR)/libcuda.so.1 $(FAKE_LEGACY_DIR)/libcudart.so.13 $(FAKE_LEGACY_DIR)/libcudart.so \
  $(FAKE_LEGACY_DIR)/libnccl.so.2 $(FAKE_LEGACY_DIR)/libnccl.so \
  $(FAKE_DIR)/selftest $(FAKE_DIR)/plt_spy.so $(BUILD)/fake-versioned/libnccl.so.2 $(FAKE_DIR)/libncclguard_probe.so \
  $(BUILD)/fake-other/libnccl-other.so.2

testbins: $(FAKE_OUT)

$(FAKE_DIR)/libcuda.so.1: $(FAKE_CUDA_SRC) tests/fake/fake_cuda_int.h
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(FAKE_CFLAGS),$^)
	$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -o $@ $(FAKE_CUDA_SRC) -lpthread

$(FAKE_DIR)/libnvidia-ml.so.1: tests/fake/fake_nvml.c
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(ALL_CFLAGS),$^)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,-z,defs -o $@ $<
$(FAKE_LEGACY_DIR)/libnvidia-ml.so.1: $(FAKE_DIR)/libnvidia-ml.so.1
	@mkdir -p $(dir $@)
	cp -f $< $@

$(FAKE_DIR)/libcudart.so.13: tests/fake/fake_cudart.c $(FAKE_DIR)/libcuda.so.1
	$(call ng_deps,$(CC) $(FAKE_CFLAGS),$^)
	$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,-z,defs -o $@ tests/fake/fake_cudart.c \
	  -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread

# NCCL's exports only (tests/fake/exports.map)
FAKE_NCCL_LDFLAGS = -Wl,--version-script=tests/fake/exports.map
$(FAKE_DIR)/libnccl.so.2: $(FAKE_NCCL_SRC) $(FAKE_NCCL_HDR) $(FAKE_DIR)/libcuda.so.1 tests/fake/exports.map
	$(call ng_deps,$(CC) $(FAKE_CFLAGS),$(FAKE_NCCL_SRC))
	$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libnccl.so.2 $(FAKE_NCCL_LDFLAGS) -Wl,-z,defs -o $@ $(FAKE_NCCL_SRC) \
	  -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread -lrt -ldl

$(FAKE_LEGACY_DIR)/libnccl.so.2: $(FAKE_NCCL_SRC) $(FAKE_NCCL_HDR) $(FAKE_DIR)/libcuda.so.1 tests/fake/exports.map
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(FAKE_CFLAGS) -DFAKE_LEGACY,$(FAKE_NCCL_SRC))
	$(CC) $(FAKE_CFLAGS) -DFAKE_LEGACY -shared -Wl,-soname,libnccl.so.2 $(FAKE_NCCL_LDFLAGS) -Wl,-z,defs -o $@ $(FAKE_NCCL_SRC) \
	  -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread -lrt -ldl

# The same under another name (soname libnccl-other.so.2): a second libnccl that a library can link against
# (tests/t_dlsym.sh, two copies of libnccl; issue 22)
$(BUILD)/fake-other/libnccl-other.so.2: $(FAKE_NCCL_SRC) $(FAKE_NCCL_HDR) $(FAKE_DIR)/libcuda.so.1 tests/fake/exports.map
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libnccl-other.so.2 $(FAKE_NCCL_LDFLAGS) -Wl,-z,defs -o $@ $(FAKE_NCCL_SRC) \
	  -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread -lrt -ldl

# The same with a version node (tests/fake/versioned.map), for dlvsym (tests/t_dlsym.sh)
$(BUILD)/fake-versioned/libnccl.so.2: $(FAKE_NCCL_SRC) $(FAKE_NCCL_HDR) $(FAKE_DIR)/libcuda.so.1 tests/fake/versioned.map
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -shared -Wl,-soname,libnccl.so.2 -Wl,--version-script=tests/fake/versioned.map -Wl,-z,defs \
	  -o $@ $(FAKE_NCCL_SRC) -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread -lrt -ldl

# The fake NCCL of single releases (tests/fake/README.md, "One release's fake"): the same objects, linked with
# the release's version code (tests/fake/release.c) and a version script without the names that release lacks
# (tests/fake/releases.txt); libnccl.so.2 as NCCL exports, libnccl-versioned.so.2 the same under the version
# node NCCL_FAKE (dlvsym). Run with LD_LIBRARY_PATH=$(BUILD)/fake-rel/CODE:$(BUILD)/fake.
FAKE_REL_DIR = $(BUILD)/fake-rel
FAKE_RELEASES = 22105 22203 22606 22703 22803 22809 22903 23007
FAKE_REL_OBJ = $(FAKE_NCCL_SRC:tests/fake/%.c=$(FAKE_REL_DIR)/obj/%.o)
FAKE_REL_OUT = $(foreach v,$(FAKE_RELEASES),$(FAKE_REL_DIR)/$(v)/libnccl.so.2 $(FAKE_REL_DIR)/$(v)/libnccl-versioned.so.2)
testbins: $(FAKE_REL_OUT)
$(FAKE_REL_DIR)/obj/%.o: tests/fake/%.c | check-nccl-header
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -MMD -MP -c $< -o $@
$(FAKE_REL_DIR)/%/exports.map $(FAKE_REL_DIR)/%/versioned.map: tests/fake/releases.txt tests/fake/release_map.sh
	@mkdir -p $(dir $@)
	sh tests/fake/release_map.sh $* >$(FAKE_REL_DIR)/$*/exports.map
	sh tests/fake/release_map.sh $* NCCL_FAKE >$(FAKE_REL_DIR)/$*/versioned.map
$(FAKE_REL_DIR)/%/libnccl.so.2: $(FAKE_REL_OBJ) tests/fake/release.c $(FAKE_REL_DIR)/%/exports.map $(FAKE_DIR)/libcuda.so.1
	$(CC) $(FAKE_CFLAGS) -DFAKE_RELEASE=$* -shared -Wl,-soname,libnccl.so.2 -Wl,--version-script=$(FAKE_REL_DIR)/$*/exports.map \
	  -Wl,-z,defs -o $@ $(FAKE_REL_OBJ) tests/fake/release.c -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread -lrt -ldl
$(FAKE_REL_DIR)/%/libnccl-versioned.so.2: $(FAKE_REL_OBJ) tests/fake/release.c $(FAKE_REL_DIR)/%/versioned.map $(FAKE_DIR)/libcuda.so.1
	$(CC) $(FAKE_CFLAGS) -DFAKE_RELEASE=$* -shared -Wl,-soname,libnccl.so.2 -Wl,--version-script=$(FAKE_REL_DIR)/$*/versioned.map \
	  -Wl,-z,defs -o $@ $(FAKE_REL_OBJ) tests/fake/release.c -L$(FAKE_DIR) -l:libcuda.so.1 -lpthread -lrt -ldl
.PRECIOUS: $(FAKE_REL_DIR)/%/exports.map $(FAKE_REL_DIR)/%/versioned.map $(FAKE_REL_DIR)/obj/%.o

$(FAKE_DIR)/libcuda.so: $(FAKE_DIR)/libcuda.so.1
	@ln -sf libcuda.so.1 $@
$(FAKE_DIR)/libcudart.so: $(FAKE_DIR)/libcudart.so.13
	@ln -sf libcudart.so.13 $@
$(FAKE_DIR)/libnccl.so: $(FAKE_DIR)/libnccl.so.2
	@ln -sf libnccl.so.2 $@

$(FAKE_LEGACY_DIR)/libcuda.so.1: $(FAKE_DIR)/libcuda.so.1
	@mkdir -p $(dir $@)
	cp -f $< $@
$(FAKE_LEGACY_DIR)/libcudart.so.13: $(FAKE_DIR)/libcudart.so.13
	@mkdir -p $(dir $@)
	cp -f $< $@
$(FAKE_LEGACY_DIR)/libcudart.so: $(FAKE_LEGACY_DIR)/libcudart.so.13
	@ln -sf libcudart.so.13 $@
$(FAKE_LEGACY_DIR)/libnccl.so: $(FAKE_LEGACY_DIR)/libnccl.so.2
	@ln -sf libnccl.so.2 $@

$(FAKE_DIR)/selftest: tests/fake/selftest.c $(FAKE_DIR)/libnccl.so $(FAKE_DIR)/libcudart.so $(FAKE_DIR)/libcuda.so
	$(call ng_deps,$(CC) $(FAKE_CFLAGS),$^)
	$(CC) $(FAKE_CFLAGS) -o $@ tests/fake/selftest.c -L$(FAKE_DIR) -lnccl -lcudart -lcuda -lpthread

# an LD_PRELOAD interposer that records ncclCommWindowDeregister calls (PLT test)
$(FAKE_DIR)/plt_spy.so: tests/fake/plt_spy.c
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(FAKE_CFLAGS),$^)
	$(CC) $(FAKE_CFLAGS) -shared -o $@ $< -ldl

# a library named like ncclguard that issues one all-reduce: the checker's caller=guard (t_fake.sh)
$(FAKE_DIR)/libncclguard_probe.so: tests/fake/ncclguard_probe.c $(FAKE_DIR)/libnccl.so.2
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(FAKE_CFLAGS),$^)
	$(CC) $(FAKE_CFLAGS) -shared -o $@ $< -L$(FAKE_DIR) -l:libnccl.so.2
