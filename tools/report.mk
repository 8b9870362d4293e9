# The tables (shim/logschema.def, shim/reasons.def, shim/decisions.def, tools/catalogue.def) and what
# is generated from them. Included by the top-level Makefile. `make tables` rewrites the generated
# files that are committed: the Python hook's key list (tools/python/ncclguard_hook/_schema.py),
# docs/LOG.md and the catalogue's table in docs/NCCL.md; tests/t_tools_report.sh and tests/t_docs.sh
# fail when they are stale.
TABLES = shim/logschema.def shim/reasons.def shim/decisions.def tools/catalogue.def

$(BUILD)/gentables: tools/gentables.c $(TABLES)
	@mkdir -p $(dir $@)
	$(call ng_say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $<

# ncclguard-report includes both tables: its object's -MMD dependencies (tools/tools.mk) name them.
tools: $(BUILD)/gentables

.PHONY: tables
tables: $(BUILD)/gentables
	$(BUILD)/gentables --python >tools/python/ncclguard_hook/_schema.py
	$(BUILD)/gentables --doc >docs/LOG.md
	$(BUILD)/gentables --nccl-doc docs/NCCL.md >docs/NCCL.md.tmp && mv -f docs/NCCL.md.tmp docs/NCCL.md
