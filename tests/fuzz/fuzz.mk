# Fuzzing (libFuzzer, clang): included by the top Makefile. See tests/fuzz/README.md.
#   make fuzz-ci      each harness for FUZZ_CI_TIME seconds (default 15) from the committed corpus (CI)
#   make fuzz         each harness for FUZZ_TIME seconds (default 600; FUZZ_JOBS parallel jobs in
#                     libFuzzer's fork mode, which also restarts the process now and then: the fake
#                     NCCL keeps every communicator it made), then the new inputs are merged
#                     (minimised) into tests/fuzz/corpus/<harness>
#   make fuzz-cov     line/region coverage of shim/*.c reached by the committed corpus (llvm-cov)
#   make fuzz-build   only build $(BUILD)/fuzz/fuzz_{env,path,api}
# Harnesses: fuzz_env (NCCLGUARD_* parser + log-line builder), fuzz_path (log-path expansion),
# fuzz_api (random API call sequences through the shim against the fake NCCL of $(BUILD)/fake).
FUZZ_CC ?= clang
FUZZ_TIME ?= 600
FUZZ_CI_TIME ?= 15
FUZZ_JOBS ?= 1
FUZZ_DIR = $(BUILD)/fuzz
FUZZ_SRCDIR = tests/fuzz
FUZZ_NAMES = fuzz_env fuzz_path fuzz_api
FUZZ_SAN = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=gnu11 -g -O1 -Wall -Wextra -pthread -Ishim -I$(NCCL_INCLUDE) $(if $(CUDA_INCLUDE),-I$(CUDA_INCLUDE)) -DNG_NO_IFUNC
FUZZ_FAKE_LINK = -L$(abspath $(BUILD)/fake) -l:libnccl.so.2 -l:libcudart.so.13 -Wl,--disable-new-dtags,-rpath,$(abspath $(BUILD)/fake)
FUZZ_MERGE_OPTS = -rss_limit_mb=4096 -timeout=20

.PHONY: fuzz fuzz-ci fuzz-build fuzz-cov
fuzz-build: $(addprefix $(FUZZ_DIR)/,$(FUZZ_NAMES))

$(FUZZ_DIR)/fuzz_env: $(FUZZ_SRCDIR)/fuzz_env.c $(SHIM_SRC) shim/guard.h
	@mkdir -p $(@D)
	$(call ng_deps,$(FUZZ_CC) $(FUZZ_CFLAGS),$^)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ $< $(SHIM_SRC) -ldl -lm
$(FUZZ_DIR)/fuzz_path: $(FUZZ_SRCDIR)/fuzz_path.c $(SHIM_SRC) shim/guard.h
	@mkdir -p $(@D)
	$(call ng_deps,$(FUZZ_CC) $(FUZZ_CFLAGS),$^)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -o $@ $< $(SHIM_SRC) -ldl
# The shim's wrappers are exported from the program (-rdynamic): the fake NCCL's own calls through
# its public symbols reach them, as with LD_PRELOAD.
$(FUZZ_DIR)/fuzz_api: $(FUZZ_SRCDIR)/fuzz_api.c $(SHIM_SRC) shim/guard.h $(PROGS_FAKE_DEPS)
	@mkdir -p $(@D)
	$(call ng_deps,$(FUZZ_CC) $(FUZZ_CFLAGS),$^)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -rdynamic -o $@ $< $(SHIM_SRC) $(FUZZ_FAKE_LINK) -ldl

# tests/fuzz/run.sh fuzzes one harness from the committed corpus into $(FUZZ_DIR)/work/<name>;
# a crash leaves $(FUZZ_DIR)/artifacts/<name>/crash-* (or leak-, timeout-, oom-) and fails the target.
fuzz-ci: fuzz-build
	@rm -rf $(FUZZ_DIR)/work $(FUZZ_DIR)/artifacts
	@st=0; for f in $(FUZZ_NAMES); do $(FUZZ_SRCDIR)/run.sh $(FUZZ_DIR) $$f $(FUZZ_CI_TIME) || st=1; done; exit $$st

fuzz: fuzz-build
	@st=0; for f in $(FUZZ_NAMES); do $(FUZZ_SRCDIR)/run.sh $(FUZZ_DIR) $$f $(FUZZ_TIME) -fork=$(FUZZ_JOBS) || st=1; done; \
	  [ $$st = 0 ] || { echo "fuzz: a harness failed; corpus not merged"; exit 1; }
	@cd $(FUZZ_DIR) && for f in $(FUZZ_NAMES); do rm -rf min/$$f && mkdir -p min/$$f && \
	  ./$$f -merge=1 $(FUZZ_MERGE_OPTS) min/$$f $(abspath $(FUZZ_SRCDIR)/corpus)/$$f work/$$f >merge-$$f.log 2>&1 && \
	  rm -rf $(abspath $(FUZZ_SRCDIR)/corpus)/$$f && mv min/$$f $(abspath $(FUZZ_SRCDIR)/corpus)/$$f && \
	  echo "merged: $$f $$(ls $(abspath $(FUZZ_SRCDIR)/corpus)/$$f | wc -l) inputs"; done

# Coverage: the same harnesses built with clang's source-based coverage, run over the corpus.
FUZZ_COV_FLAGS = -fprofile-instr-generate -fcoverage-mapping -fsanitize=fuzzer
$(FUZZ_DIR)/cov/%: $(FUZZ_SRCDIR)/%.c $(SHIM_SRC) shim/guard.h $(PROGS_FAKE_DEPS)
	@mkdir -p $(@D)
	$(call ng_deps,$(FUZZ_CC) $(FUZZ_CFLAGS),$^)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_COV_FLAGS) -rdynamic -o $@ $< $(SHIM_SRC) $(FUZZ_FAKE_LINK) -ldl -lm
fuzz-cov: $(addprefix $(FUZZ_DIR)/cov/,$(FUZZ_NAMES))
	@cd $(FUZZ_DIR)/cov && rm -f *.profraw && for f in $(FUZZ_NAMES); do \
	  LLVM_PROFILE_FILE=$$f.profraw ./$$f -runs=0 -rss_limit_mb=4096 $(abspath $(FUZZ_SRCDIR)/corpus)/$$f >$$f.log 2>&1; done; \
	  llvm-profdata merge -sparse *.profraw -o all.profdata && \
	  llvm-cov report ./fuzz_api -object ./fuzz_env -object ./fuzz_path -instr-profile=all.profdata $(abspath $(SHIM_SRC))

# stress_threads: thread-per-communicator stress for ThreadSanitizer and leak checks (t_hardening.sh);
# built with the variant's flags (SAN=tsan in build-tsan), linked against the fakes like tests/progs.
$(BUILD)/fuzz/stress_threads: $(FUZZ_SRCDIR)/stress_threads.c $(PROGS_FAKE_DEPS)
	@mkdir -p $(@D)
	$(call ng_deps,$(CC) $(PROGS_CFLAGS),$^)
	$(CC) $(PROGS_CFLAGS) -o $@ $< $(PROGS_FAKE_LINK) -lpthread
testbins: $(BUILD)/fuzz/stress_threads
