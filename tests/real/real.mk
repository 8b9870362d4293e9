# Programs against a REAL libnccl (no GPU needed): resolution tests. NCCL_REAL_LIB is the folder
# holding libnccl.so.2 (the CUDA toolkit's by default); skipped when there is none.
NCCL_REAL_LIB ?= $(firstword $(foreach d,/usr/local/cuda/lib /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu,$(if $(wildcard $(d)/libnccl.so.2),$(d))))
testbins: $(BUILD)/real/no_nccl
$(BUILD)/real/no_nccl: tests/real/no_nccl.c
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(ALL_CFLAGS),$^)
	$(CC) $(ALL_CFLAGS) -o $@ $< -ldl

ifneq ($(NCCL_REAL_LIB),)
REAL_BINS = $(BUILD)/real/libnccluser.so $(BUILD)/real/main_local $(BUILD)/real/main_linked $(BUILD)/real/probe
testbins: $(REAL_BINS)
$(BUILD)/real/libnccluser.so: tests/real/nccl_user.c
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(ALL_CFLAGS) -I$(NCCL_INCLUDE) $(if $(CUDA_INCLUDE),-I$(CUDA_INCLUDE)),$^)
	$(CC) $(ALL_CFLAGS) -shared -I$(NCCL_INCLUDE) $(if $(CUDA_INCLUDE),-I$(CUDA_INCLUDE)) -o $@ $< \
	  -L$(NCCL_REAL_LIB) -l:libnccl.so.2
$(BUILD)/real/main_local: tests/real/main_local.c
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(ALL_CFLAGS),$^)
	$(CC) $(ALL_CFLAGS) -o $@ $< -ldl
$(BUILD)/real/main_linked: tests/real/main_linked.c $(BUILD)/real/libnccluser.so
	$(call ng_deps,$(CC) $(ALL_CFLAGS),$^)
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD)/real -lnccluser -Wl,-rpath-link,$(NCCL_REAL_LIB)
endif
$(BUILD)/real/probe: tests/real/probe.c
	@mkdir -p $(dir $@)
	$(call ng_deps,$(CC) $(ALL_CFLAGS) -I$(NCCL_INCLUDE),$^)
	$(CC) $(ALL_CFLAGS) -I$(NCCL_INCLUDE) -o $@ $< -L$(NCCL_REAL_LIB) -l:libnccl.so.2 -ldl
