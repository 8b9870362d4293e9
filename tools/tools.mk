# The user tools (tools/README.md): ncclguard-run (POSIX sh), ncclguard-doctor and
# ncclguard-report (C). Included by the top-level Makefile; `make tools` builds them into $(BUILD)/.
# Neither binary has a NEEDED entry on libcuda or libnccl: the doctor dlopens them.
TOOLS_BIN = $(BUILD)/ncclguard-run $(BUILD)/ncclguard-doctor $(BUILD)/ncclguard-report

.PHONY: tools
tools: $(TOOLS_BIN)

# cuda.h only gives the doctor checked prototypes; it builds without it too.
$(BUILD)/ncclguard-doctor: tools/doctor.c VERSION
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(NG_IDENT) $(if $(CUDA_INCLUDE),-I$(CUDA_INCLUDE)) -o $@ $< -ldl

$(BUILD)/ncclguard-report: tools/report.c VERSION
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(NG_IDENT) -o $@ $<

# A copy next to libncclguard.so, so that build/ncclguard-run finds build/libncclguard.so.
$(BUILD)/ncclguard-run: tools/ncclguard-run VERSION
	@mkdir -p $(dir $@)
	sed 's/^NG_VERSION=.*/NG_VERSION="$(NG_VERSION) ($(NG_REVISION))"/' $< >$@
	chmod 0755 $@
