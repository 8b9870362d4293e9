# Unit tests (tests/unit): the registration policy's phases with a stubbed agreement. Included by
# ../../Makefile. policy_test includes shim/policy.c and links every other object of the library
# except agree.o (stubbed in the test), against the fake NCCL and runtime of $(BUILD)/fake (no rpath:
# tests/t_unit.sh sets LD_LIBRARY_PATH).
UNIT_DIR = $(BUILD)/unit
UNIT_SHIM_OBJ = $(filter-out $(BUILD)/shim/policy.o $(BUILD)/shim/agree.o,$(SHIM_OBJ))

$(UNIT_DIR)/policy_test: tests/unit/policy_test.c $(UNIT_SHIM_OBJ) $(BUILD)/fake/libnccl.so.2 $(BUILD)/fake/libcudart.so.13
	@mkdir -p $(@D)
	$(call ng_deps,$(CC) $(ALL_CFLAGS) -Ishim,$^)
	$(CC) $(ALL_CFLAGS) -Ishim -o $@ tests/unit/policy_test.c $(UNIT_SHIM_OBJ) \
	  -L$(BUILD)/fake -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath-link,$(BUILD)/fake -ldl -lpthread

.PHONY: testbins
testbins: $(UNIT_DIR)/policy_test
