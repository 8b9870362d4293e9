# The user tools (tools/README.md): ncclguard-run (POSIX sh), ncclguard-doctor and
# ncclguard-report (C). Included by the top-level Makefile; `make tools` builds them into $(BUILD)/.
# Neither binary has a NEEDED entry on libcuda or libnccl: the doctor dlopens them. The doctor's --probe
# (tools/probe.c) runs the header-free scenario programs of $(BUILD)/probe (tests/progs/progs.mk).
# The table of NCCLGUARD_* variables (shim/vars.def) reaches the other languages through genvars:
# the launcher's options (built into $(BUILD)/ncclguard-run), the Python hook's table
# (tools/python/ncclguard_hook/_vars.py, committed so that the hook works from an unbuilt checkout;
# tests/t_tools_report.sh checks it is current) and docs/configuration.md's tables (make docs).
TOOLS_BIN = $(BUILD)/ncclguard-run $(BUILD)/ncclguard-doctor $(BUILD)/ncclguard-report
GENVARS = $(BUILD)/genvars
VARS_SH = $(BUILD)/ncclguard-vars.sh
VARS_PY = tools/python/ncclguard_hook/_vars.py
TOOLS_OBJ = $(BUILD)/tools/doctor.o $(BUILD)/tools/probe.o $(BUILD)/tools/report.o $(BUILD)/tools/genvars.o $(BUILD)/tools/varinfo.o

.PHONY: tools docs readme
# the probe's scenario programs (tests/progs/progs.mk, header-free) are part of the tools
tools: $(TOOLS_BIN) $(VARS_PY) $(PROBE_PROGS) $(PROBE_DATA)

# One object per source, each with its header dependencies (-MMD -MP); the table's reader is
# the library's own object ($(BUILD)/shim/vars.o), with the tools' view of the table beside it
# (tools/varinfo.c: the rows the library does not read, how defaults are shown).
# cuda.h only gives the doctor checked prototypes; it builds without it too. Both print the identity
# (VERSION and revision): they are rebuilt when it changes ($(NG_IDENT_STAMP), Makefile).
$(BUILD)/tools/doctor.o: tools/doctor.c VERSION $(NG_IDENT_STAMP)
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) $(NG_IDENT) -Ishim $(if $(CUDA_INCLUDE),-I$(CUDA_INCLUDE)) -MMD -MP -c $< -o $@
$(BUILD)/tools/probe.o: tools/probe.c VERSION $(NG_IDENT_STAMP)
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) $(NG_IDENT) -MMD -MP -c $< -o $@
$(BUILD)/tools/report.o: tools/report.c VERSION $(NG_IDENT_STAMP)
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) $(NG_IDENT) -MMD -MP -c $< -o $@
$(BUILD)/tools/genvars.o $(BUILD)/tools/varinfo.o: $(BUILD)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim -MMD -MP -c $< -o $@

$(BUILD)/ncclguard-doctor: $(BUILD)/tools/doctor.o $(BUILD)/tools/probe.o $(BUILD)/tools/varinfo.o $(BUILD)/shim/vars.o
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ -ldl
$(BUILD)/ncclguard-report: $(BUILD)/tools/report.o
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^
# genvars runs at build time and is not installed.
$(GENVARS): $(BUILD)/tools/genvars.o $(BUILD)/tools/varinfo.o $(BUILD)/shim/vars.o
	$(call ng_say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^

$(VARS_SH): $(GENVARS)
	$(call ng_say,GEN,$@)
	$(Q)$(GENVARS) --sh >$@.tmp && mv -f $@.tmp $@

# Written next to the hook's sources (the launcher puts tools/python on PYTHONPATH); through a
# file of its own name and a rename, so that builds of several variants may run at once.
$(VARS_PY): $(GENVARS)
	$(call ng_say,GEN,$@)
	$(Q)$(GENVARS) --py >$@.$(notdir $(BUILD)).tmp && mv -f $@.$(notdir $(BUILD)).tmp $@

# A copy next to libncclguard.so, so that build/ncclguard-run finds build/libncclguard.so; the
# table of variables goes in at the marker line.
$(BUILD)/ncclguard-run: tools/ncclguard-run $(VARS_SH) VERSION $(NG_IDENT_STAMP)
	@mkdir -p $(dir $@)
	$(call ng_say,GEN,$@)
	$(Q)grep -qx '# @NG_VARS_TABLE@' $<
	$(Q)sed -e 's/^NG_VERSION=.*/NG_VERSION="$(NG_IDENT_TEXT)"/' \
	  -e '/^# @NG_VARS_TABLE@$$/r $(VARS_SH)' -e '/^# @NG_VARS_TABLE@$$/d' $< >$@.tmp
	$(Q)chmod 0755 $@.tmp && mv -f $@.tmp $@

# docs/configuration.md's tables of variables and options, generated between their markers
# (tests/t_config.sh compares); `make readme` is the old name.
docs: $(GENVARS)
	$(GENVARS) --readme docs/configuration.md >docs/configuration.md.tmp && mv -f docs/configuration.md.tmp docs/configuration.md
readme: docs

-include $(TOOLS_OBJ:.o=.d)
