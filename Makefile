# headscope — build, test, bench.
#   make deps                          install the Debian packages (needs root)
#   make                               build/libheadscope.a, build/libheadscope.so.*, build/headscope
#   make test                          Criterion suites + tests/cli.sh
#   make SANITIZE=address,undefined test   the same under sanitizers, in build-san/
#   make bench                         speed ratios (see docs/bench.md)
#   make bench-stored / bench-8b       the GGUF rows against llama.cpp (LLAMACPP=) / the 8B row
#   make docs-images                   draws every picture of README.md and docs/ again
#   make fuzz                          libFuzzer harnesses (clang), short runs
#   make install [PREFIX=/usr/local] [DESTDIR=]   binary, libraries, headers, .pc, man, docs
#   make uninstall                     removes what install put there
#   make lib-test                      the installed library, examples/, the Python package (lib.mk)
#   make wheel                         build/headscope-*.whl: the Python package, the library inside

DEB_PKGS = build-essential pkg-config libopenblas-openmp-dev libpng-dev libcjson-dev \
           libutf8proc-dev libcriterion-dev python3 python3-numpy python3-torch \
           python3-regex pngcheck clang libclang-rt-14-dev valgrind parallel \
           chromium chromium-driver python3-selenium fonts-dejavu-core
# the Python package: its wheel (make wheel) installed by pip into venvs; no setuptools needed;
# a notebook showing its page, executed headlessly by its tests
DEB_PKGS += python3-pip python3-venv python3-nbclient python3-nbformat python3-ipykernel

PKGS = openblas libpng libcjson libutf8proc

CC ?= cc
ifeq ($(origin CC),default)
CC = cc
endif

WARN = -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
       -Wmissing-prototypes -Wformat=2 -Wvla -Wwrite-strings -Wcast-qual -Wundef
ifdef CI
WARN += -Werror
endif

ifdef SANITIZE
BUILD ?= build-san
SANFLAGS = -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
# GCC's "undefined" leaves out float-to-int conversions out of range (clang's fuzzers have
# them): a NaN or huge float converted to int is undefined behaviour too.
ifneq ($(findstring undefined,$(SANITIZE)),)
SANFLAGS += -fsanitize=float-cast-overflow
endif
else
BUILD ?= build
SANFLAGS =
endif

# Every library must be known to pkg-config; stop with the exact install line otherwise.
ifeq ($(filter deps clean,$(MAKECMDGOALS)),)
MISSING := $(strip $(foreach p,$(PKGS) criterion,$(if $(shell pkg-config --exists $(p) && echo y),,$(p))))
ifneq ($(MISSING),)
$(error missing libraries: $(MISSING); run: sudo apt-get install -y $(DEB_PKGS)  (or: make deps))
endif
# OpenBLAS's OpenMP build: headscope's parallel loops (heads, rows) and BLAS's threads are
# one OpenMP team, so neither spins against the other. Linked with an rpath to its folder,
# because Debian installs the pthread and OpenMP builds under the same soname.
BLAS_DIR := /usr/lib/$(shell $(CC) -print-multiarch 2>/dev/null)/openblas-openmp
ifeq ($(wildcard $(BLAS_DIR)/pkgconfig/openblas.pc),)
$(error missing OpenBLAS's OpenMP build ($(BLAS_DIR)); run: sudo apt-get install -y $(DEB_PKGS)  (or: make deps))
endif
PKG_CFLAGS := $(shell PKG_CONFIG_PATH=$(BLAS_DIR)/pkgconfig pkg-config --cflags $(PKGS))
PKG_LIBS := $(shell PKG_CONFIG_PATH=$(BLAS_DIR)/pkgconfig pkg-config --libs $(PKGS)) \
            -Wl,-rpath,$(BLAS_DIR) -lm -lpthread
CRIT_CFLAGS := $(shell pkg-config --cflags criterion)
CRIT_LIBS := $(shell pkg-config --libs criterion)
endif

CPPFLAGS += -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L
CFLAGS ?= -O2 -g
OMPFLAGS = -fopenmp
# lets loops with float comparisons vectorise (no program here reads FP exception flags)
MATHFLAGS = -fno-trapping-math
ALLCFLAGS = $(WARN) $(CFLAGS) $(MATHFLAGS) $(OMPFLAGS) $(SANFLAGS) $(PKG_CFLAGS)
LDFLAGS += $(OMPFLAGS) $(SANFLAGS)

LIB_SRC = $(sort $(wildcard src/*/*.c) $(wildcard viz/*.c))
CLI_SRC = $(sort $(wildcard cli/*.c))
TEST_SRC = $(sort $(wildcard tests/test_*.c))
BENCH_SRC = $(sort $(wildcard bench/*.c))

# The page's HTML, CSS and JavaScript are real files in viz/page/; viz/page/pagegen.c turns
# them into byte arrays at build time (no xxd, no ld -b binary, no #embed).
PAGE_FILES = $(sort $(wildcard viz/page/*.html viz/page/*.css viz/page/*.js))
PAGEGEN = $(BUILD)/gen/pagegen
# the report page (index.html) and the patching page (patch.html, headscope patch's index.html)
PAGE_C = $(BUILD)/gen/page.c $(BUILD)/gen/patch_page.c
PAGE_OBJ = $(PAGE_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)

LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(PAGE_OBJ)
CLI_OBJ = $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB = $(BUILD)/libheadscope.a
BIN = $(BUILD)/headscope

.PHONY: all deps test unit cli-test cli-faults fuzz-replay browser-test docs-images docs-test ref-test bench-smoke llamacpp-test bench bench-stored bench-8b fuzz clean example
all: $(LIB) $(BIN)

# The commit a build comes from, recorded in reports (empty outside a git checkout). The
# stamp file changes only when the commit does, so only src/core/version.o rebuilds.
GIT_COMMIT := $(shell git rev-parse --git-dir >/dev/null 2>&1 && \
                { git rev-parse --short=12 HEAD 2>/dev/null; git diff --quiet HEAD -- 2>/dev/null || echo -dirty; } | tr -d '\n')
ifeq ($(filter deps clean,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(BUILD)/commit.txt 2>/dev/null)" = "$(GIT_COMMIT)" ] || echo "$(GIT_COMMIT)" > $(BUILD)/commit.txt; })
endif
$(BUILD)/obj/src/core/version.o: $(BUILD)/commit.txt
$(BUILD)/obj/src/core/version.o: CPPFLAGS += -DHS_GIT_COMMIT='"$(GIT_COMMIT)"'

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
deps:
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(DEB_PKGS)

# Header dependencies come from the compiler (-MMD -MP: one .d file beside each object, a
# removed header no error), so a changed header rebuilds exactly the files that include it.
DEPFLAGS = -MMD -MP
# programs compiled and linked in one command: the .d file named after the program
LINKDEP = -MMD -MP -MF $@.d -MT $@
# An object or program without its .d file (a build tree from before -MMD, or an interrupted
# compile) is rebuilt: each depends on its .d, an explicit target with no recipe (DEPFILES,
# at the end), which counts as changed while absent.
$(BUILD)/obj/%.o: %.c $(BUILD)/obj/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(DEPFLAGS) -c $< -o $@

$(PAGEGEN): viz/page/pagegen.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $< -o $@

$(BUILD)/gen/page.c: $(PAGEGEN) $(PAGE_FILES)
	@mkdir -p $(dir $@)
	$(PAGEGEN) viz/page/index.html $@

$(BUILD)/gen/patch_page.c: $(PAGEGEN) $(PAGE_FILES)
	@mkdir -p $(dir $@)
	$(PAGEGEN) viz/page/patch.html $@ hs_patch_page

$(PAGE_OBJ): $(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $(CLI_OBJ) $(LIB) $(PKG_LIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(LIB) $(BUILD)/tests/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(LINKDEP) $(CRIT_CFLAGS) $< $(LIB) $(PKG_LIBS) $(CRIT_LIBS) $(LDFLAGS) -o $@

# test_options reads the options through the command line's own parser too
TEST_OPTIONS_CLI = $(addprefix $(BUILD)/obj/cli/,analyze_args.o common.o suggest.o corpus_progress.o)
$(BUILD)/tests/test_options: tests/test_options.c $(TEST_OPTIONS_CLI) $(LIB) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(LINKDEP) $(CRIT_CFLAGS) $< $(TEST_OPTIONS_CLI) \
		$(LIB) $(PKG_LIBS) $(CRIT_LIBS) $(LDFLAGS) -o $@

# test_ops and test_forward built again with the elementwise kernels' AVX2 clone only
# (src/nn/ops.c, gemv.c, HS_CLONES_NO_V4): a CPU with AVX-512 would otherwise never run it.
$(BUILD)/obj-v3/%.o: src/nn/%.c $(BUILD)/obj-v3/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(DEPFLAGS) -DHS_CLONES_NO_V4 -c $< -o $@
# the decoders of stored types too (src/model/quant.c, finite.c, weights.c' F16, quant_i8.c's
# integer forms, quant_rows.c's one-row kernels, whose AVX-512 path it leaves out):
# test_quant, test_gguf_quant, test_q8gemm and test_gemv check them in the AVX2 build
V3_MODEL = $(addprefix $(BUILD)/obj-v3/model/,quant.o quant_i8.o quant_rows.o finite.o dtype.o weights.o)
$(BUILD)/obj-v3/model/%.o: src/model/%.c $(BUILD)/obj-v3/model/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(DEPFLAGS) -DHS_CLONES_NO_V4 -c $< -o $@
V3_NN = $(BUILD)/obj-v3/ops.o $(BUILD)/obj-v3/gemv.o
$(BUILD)/tests-v3/%: tests/%.c $(V3_NN) $(V3_MODEL) $(LIB) $(BUILD)/tests-v3/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(LINKDEP) $(CRIT_CFLAGS) $< $(V3_NN) $(V3_MODEL) $(LIB) $(PKG_LIBS) $(CRIT_LIBS) $(LDFLAGS) -o $@
TEST_V3_BIN = $(BUILD)/tests-v3/test_ops $(BUILD)/tests-v3/test_forward \
	$(BUILD)/tests-v3/test_quant $(BUILD)/tests-v3/test_gguf_quant $(BUILD)/tests-v3/test_gemv \
	$(BUILD)/tests-v3/test_q8gemm

# Criterion suites run from the repository root so fixture paths are relative to it.
# The GEMM and forward suites run again with OpenBLAS's SkylakeX kernels where the CPU has
# AVX-512: those kernels pass the merged-rows check of src/core/gemm.c (the environment's own
# kernels may not), so its merged calls are compared with the tiles there too; and once
# more with the AVX2 build of the elementwise kernels (above).
# Each suite's wall time goes to $(TIMES) (the summary at the end of `make test`).
TIMES = $(BUILD)/test-times.txt
RUN_SUITE = t0=$$(date +%s%N); HS_LLAMACPP_MODELS="$(LLAMACPP_MODELS)" ASAN_OPTIONS=detect_leaks=1
SUITE_DONE = echo "$$(( ($$(date +%s%N) - t0) / 1000000 )) ms"
# The whole Falcon, StarCoder2 and DeepSeek vocabularies as tokenizer.json (build/real-tokenizers/,
# for test_tokenizer_real) from llama.cpp's models/ggml-vocab-*.gguf (LLAMACPP_MODELS): built
# before the unit tests when LLAMACPP_MODELS names a llama.cpp checkout's models/ folder
# (a few seconds), e.g. make test LLAMACPP_MODELS=../llama.cpp/models; skipped otherwise.
LLAMACPP_MODELS ?=
REAL_TOK = $(if $(LLAMACPP_MODELS),$(if $(wildcard $(LLAMACPP_MODELS)/ggml-vocab-deepseek-llm.gguf),build/real-tokenizers/deepseek_v3.tokenizer.json))
.PHONY: real-tokenizers
real-tokenizers:
	/usr/bin/python3 fixtures/tokenizer/real/make_real_tokenizers.py $(LLAMACPP_MODELS) build/real-tokenizers
build/real-tokenizers/deepseek_v3.tokenizer.json: fixtures/tokenizer/real/make_real_tokenizers.py fixtures/tokenizer/real/gguf_vocab.py
	/usr/bin/python3 fixtures/tokenizer/real/make_real_tokenizers.py $(LLAMACPP_MODELS) build/real-tokenizers

# Suites run one test at a time: Criterion 2.4's parallel runner leaks a few 48-byte blocks
# of its own (allocated inside libcriterion) under LeakSanitizer with test_tokenizer_real's
# 36 tests and test_composition's 11, though no single test does; --jobs 1 does not.
SERIAL_SUITES = */test_tokenizer_real | */test_composition
unit: $(TEST_BIN) $(TEST_V3_BIN) $(REAL_TOK)
	@failed=; for t in $(TEST_BIN); do echo "== $$t"; \
	    $(RUN_SUITE) $$t --jobs $$(case $$t in $(SERIAL_SUITES)) echo 1;; *) echo 2;; esac) || failed="$$failed $$t"; \
	    echo "$$(basename $$t) $$($(SUITE_DONE))" >> $(TIMES); done; \
	if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then \
	    for t in $(BUILD)/tests/test_ops $(BUILD)/tests/test_forward; do echo "== $$t (OpenBLAS SkylakeX kernels)"; \
	        $(RUN_SUITE) OPENBLAS_CORETYPE=SkylakeX $$t --jobs 2 || failed="$$failed $$t(SkylakeX)"; \
	        echo "$$(basename $$t)(SkylakeX) $$($(SUITE_DONE))" >> $(TIMES); done; \
	    for t in $(TEST_V3_BIN); do echo "== $$t (the AVX2 elementwise kernels)"; \
	        $(RUN_SUITE) $$t --jobs 2 || failed="$$failed $$t"; \
	        echo "$$(basename $$t)(AVX2) $$($(SUITE_DONE))" >> $(TIMES); done; \
	else echo "== the SkylakeX-kernel and AVX2-kernel runs of test_ops and test_forward: skipped (no AVX-512)"; fi; \
	if [ -n "$$failed" ]; then echo "failing suites:$$failed"; exit 1; fi

# The command-line scripts: cli.sh (every command against the references) and cli_faults.sh
# (the fault and hostile-input matrix of issue 41: signals, limits, FIFOs, parsers) and
# cli_norms.sh (Qwen3, OLMo-2, Gemma 2 and 3 end to end) share
# nothing (each its own temporary folder) and spend much of their time in one-threaded
# Python checks, so they run at once, each one's output printed whole when it ends, with its
# wall time; then cli_outdir.sh (what a run may remove or replace in -o; it kills runs at
# chosen moments) alone. A background job of sh starts with SIGINT and SIGQUIT ignored, and a
# signal ignored at start stays ignored in headscope (as under nohup): env gives the scripts
# the default actions back, as a foreground run has them.
CLI_SCRIPTS = cli cli_faults cli_patch cli_t5 cli_norms cli_pack cli_q8
cli-test: $(BIN)
	@pids=; for s in $(CLI_SCRIPTS); do \
	    ( t0=$$(date +%s%N); HEADSCOPE=$(BIN) env --default-signal=INT,QUIT bash tests/$$s.sh \
	        > $(BUILD)/$$s.log 2>&1; rc=$$?; \
	      echo "$$s.sh $$($(SUITE_DONE))" >> $(TIMES); exit $$rc ) & pids="$$pids $$!:$$s"; done; \
	failed=; for p in $$pids; do wait $${p%%:*} || failed="$$failed $${p#*:}.sh"; \
	    echo "== tests/$${p#*:}.sh"; cat $(BUILD)/$${p#*:}.log; done; \
	t0=$$(date +%s%N); HEADSCOPE=$(BIN) bash tests/cli_outdir.sh || failed="$$failed cli_outdir.sh"; \
	echo "cli_outdir.sh $$($(SUITE_DONE))" >> $(TIMES); \
	if [ -n "$$failed" ]; then echo "failing scripts:$$failed"; exit 1; fi
cli-faults: $(BIN)
	HEADSCOPE=$(BIN) bash tests/cli_faults.sh

# The fuzz harnesses' replay mains run the committed corpora as plain tests.
FUZZ_SRC = $(sort $(wildcard tests/fuzz/fuzz_*.c))
REPLAY_BIN = $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/replay/%)
$(BUILD)/replay/%: tests/fuzz/%.c $(LIB) $(BUILD)/replay/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(LINKDEP) -DHS_FUZZ_REPLAY -DHS_FUZZ_REPLAY_MAIN $< $(LIB) $(PKG_LIBS) $(LDFLAGS) -o $@

fuzz-replay: $(REPLAY_BIN)
	$(BUILD)/replay/fuzz_gguf $$(find fixtures/gguf -name '*.gguf' | sort)
	$(BUILD)/replay/fuzz_tokenizer fixtures/tokenizer/cases.jsonl fixtures/tokenizer/family_cases.jsonl fixtures/tokenizer/unigram_cases.jsonl README.md
	$(BUILD)/replay/fuzz_tokenizer_json fixtures/tokenizer/json-corpus/*.json fixtures/tokenizer/bert-cased.tokenizer.json fixtures/tokenizer/families/*.tokenizer.json fixtures/tokenizer/real/*.small.tokenizer.json
	$(BUILD)/replay/fuzz_safetensors $$(find fixtures/bad fixtures/models -name model.safetensors | sort)
	$(BUILD)/replay/fuzz_torchbin $$(find fixtures/torchbin -name '*.bin' | sort)
	$(BUILD)/replay/fuzz_corpus $$(find fixtures/corpus -type f | sort) README.md
	$(BUILD)/replay/fuzz_partial fixtures/partial/*.json fixtures/corpus/mixed.jsonl
	$(BUILD)/replay/fuzz_folder fixtures/fuzz-folder/*
	$(BUILD)/replay/fuzz_report_files fixtures/report-files/* fixtures/partial/*.json
	$(BUILD)/replay/fuzz_added fixtures/fuzz-added/*
	$(BUILD)/replay/fuzz_resume fixtures/fuzz-resume/*
	$(BUILD)/replay/fuzz_regex fixtures/fuzz-regex/*

browser-test: $(BIN)
	HEADSCOPE=$(BIN) HS_LDFLAGS="$(LDFLAGS)" bash tests/browser.sh

# Every picture README.md and docs/ show, drawn again from the fixtures (docs/img/make_images.sh);
# docs-test checks them, the docs' links and report-schema.md's keys (tests/docs_check.sh).
docs-images: $(BIN)
	HEADSCOPE=$(BIN) HS_LDFLAGS="$(LDFLAGS)" bash docs/img/make_images.sh
docs-test: $(BIN)
	HEADSCOPE=$(BIN) HS_LDFLAGS="$(LDFLAGS)" bash tests/docs_check.sh

# The float64 references the suites compare against check themselves (fixtures/README.md).
ref-test:
	/usr/bin/python3 fixtures/ref/selftest.py
	/usr/bin/python3 fixtures/ref/family_selftest.py
	/usr/bin/python3 fixtures/ref/quant_ref.py --check fixtures/quant
	/usr/bin/python3 fixtures/ref/make_q8gemm_golden.py --check
	/usr/bin/python3 fixtures/ref/spm_ref.py
	/usr/bin/python3 fixtures/ref/t5_ref.py --check fixtures/t5
	/usr/bin/python3 bench/torch_selftest.py

# The benchmark program runs: one quick pass over small fixtures, GPT-2, BERT and a
# grouped-query family (its numbers are `make bench`'s; a crash, an error, a missing
# column or a missing roof line fails this), and the packed rows once.
bench-smoke: $(BUILD)/hs-bench
	$(BUILD)/hs-bench fixtures/tiny-gpt2 fixtures/tiny-bert --family fixtures/family-models/tiny-llama \
	    --quick --no-torch --forward-only --breakdown > $(BUILD)/bench-smoke.txt
	grep -q "BLAS GF" $(BUILD)/bench-smoke.txt
	grep -Eq "^arithmetic roofs.* float32 FMA [1-9][0-9.]* GFLOP/s|^arithmetic roofs: not measured" \
	    $(BUILD)/bench-smoke.txt
	for m in tiny-gpt2 tiny-bert tiny-llama; do \
	    awk -v m=$$m '$$1 == m && $$2 == 128 && $$3 == 1 && $$9 + 0 > 0 { ok = 1 } END { exit !ok }' \
	        $(BUILD)/bench-smoke.txt || { echo "bench-smoke: no $$m row with its BLAS column"; exit 1; }; \
	done
	$(BUILD)/hs-bench fixtures/tiny-gpt2 --packed-only --quick --threads 1 > $(BUILD)/bench-smoke-packed.txt
	grep -q "^tiny-gpt2 *32 *1 .*texts/s" $(BUILD)/bench-smoke-packed.txt

# `make test` runs every step even when one fails, then prints each step's and suite's
# wall time (slowest first) and the total, and fails if any step did. The float64
# references' self-checks run no code of ours: the sanitizer build leaves them out.
TEST_STEPS = unit cli-test fuzz-replay browser-test lib-test wheel-test $(if $(SANITIZE),,ref-test) bench-smoke
test: all
	@rm -f $(TIMES); start=$$(date +%s%N); failed=; \
	for s in $(TEST_STEPS); do t0=$$(date +%s%N); \
	    $(MAKE) --no-print-directory $$s || failed="$$failed $$s"; \
	    echo "[$$s] $$($(SUITE_DONE))" >> $(TIMES); done; \
	echo "== wall time of each step [step] and suite, slowest first ($(TIMES))"; \
	sort -k2 -n -r $(TIMES) | awk '{ printf "  %-40s %8.1f s\n", $$1, $$2 / 1000 }'; \
	echo "make test$(if $(SANITIZE), SANITIZE=$(SANITIZE)): $$(( ($$(date +%s%N) - start) / 1000000000 )) s wall time"; \
	if [ -n "$$failed" ]; then echo "failing steps:$$failed"; exit 1; fi

# the docs against the pictures, links and reports they describe (after TEST_STEPS' definition)
TEST_STEPS += docs-test

# Interoperability with llama.cpp's own programs (not in `test`: it needs a llama.cpp build):
# make llamacpp-test LLAMACPP=path/to/llama.cpp/build/bin [LLAMACPP_MODELS=path/to/llama.cpp/models]
llamacpp-test: all
	HEADSCOPE=$(BIN) LLAMACPP="$(LLAMACPP)" LLAMACPP_MODELS="$(LLAMACPP_MODELS)" bash tests/llamacpp.sh

# libFuzzer: make fuzz [FUZZ_SECONDS=30]; needs clang (in make deps).
FUZZ_SECONDS ?= 30
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 $(CPPFLAGS) $(PKG_CFLAGS)
fuzz: $(PAGE_C)
	@mkdir -p build-fuzz/corpus-gguf build-fuzz/corpus-tokenizer build-fuzz/corpus-safetensors build-fuzz/corpus-tokenizer-json build-fuzz/corpus-torchbin build-fuzz/corpus-corpus build-fuzz/corpus-partial build-fuzz/corpus-folder build-fuzz/corpus-report-files build-fuzz/corpus-added build-fuzz/corpus-resume
	for f in $$(find fixtures/bad fixtures/models -name model.safetensors); do cp $$f build-fuzz/corpus-safetensors/$$(echo $$f | tr / _); done
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_gguf.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_gguf
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_tokenizer.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_tokenizer
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_tokenizer_json.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_tokenizer_json
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_safetensors.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_safetensors
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_torchbin.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_torchbin
	cp fixtures/torchbin/*.bin build-fuzz/corpus-torchbin/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_corpus.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_corpus
	cp fixtures/corpus/* build-fuzz/corpus-corpus/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_partial.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_partial
	cp fixtures/partial/*.json build-fuzz/corpus-partial/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_folder.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_folder
	cp fixtures/fuzz-folder/* build-fuzz/corpus-folder/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_report_files.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_report_files
	cp fixtures/report-files/* build-fuzz/corpus-report-files/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_added.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_added
	cp fixtures/fuzz-added/* build-fuzz/corpus-added/
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_resume.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_resume
	cp fixtures/fuzz-resume/* build-fuzz/corpus-resume/
	@mkdir -p build-fuzz/corpus-regex
	clang $(FUZZ_FLAGS) tests/fuzz/fuzz_regex.c $(LIB_SRC) $(PAGE_C) $(PKG_LIBS) -o build-fuzz/fuzz_regex
	cp fixtures/fuzz-regex/* build-fuzz/corpus-regex/
	find fixtures/gguf -name '*.gguf' -exec cp {} build-fuzz/corpus-gguf/ ';'
	cp README.md docs/*.md fixtures/tokenizer/family_cases.jsonl fixtures/tokenizer/unigram_cases.jsonl build-fuzz/corpus-tokenizer/
	cp fixtures/tokenizer/json-corpus/*.json build-fuzz/corpus-tokenizer-json/
	build-fuzz/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-gguf
	build-fuzz/fuzz_tokenizer -max_total_time=$(FUZZ_SECONDS) -max_len=4096 build-fuzz/corpus-tokenizer
	build-fuzz/fuzz_tokenizer_json -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-tokenizer-json
	build-fuzz/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-safetensors
	build-fuzz/fuzz_torchbin -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-torchbin
	build-fuzz/fuzz_corpus -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-corpus
	build-fuzz/fuzz_partial -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-partial
	build-fuzz/fuzz_folder -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-folder
	build-fuzz/fuzz_report_files -max_total_time=$(FUZZ_SECONDS) -max_len=65536 build-fuzz/corpus-report-files
	build-fuzz/fuzz_added -max_total_time=$(FUZZ_SECONDS) -max_len=4096 build-fuzz/corpus-added build-fuzz/corpus-resume
	build-fuzz/fuzz_regex -max_total_time=$(FUZZ_SECONDS) -max_len=4096 build-fuzz/corpus-regex

example: all
	$(BIN) attn fixtures/tiny-gpt2 --text "The cat sat on the mat. The cat sat on the mat." -o /tmp/headscope-attn.npy

BENCH_MODEL = $(BUILD)/bench/gpt2-small
BENCH_BERT = $(BUILD)/bench/bert-base
BENCH_ARGS ?=
# one model of each other family at a published shape (tokenizers from fixtures/tokenizer/)
BENCH_FAMILIES = $(BUILD)/bench/roberta-base $(BUILD)/bench/distilbert-base \
	$(BUILD)/bench/pythia-160m $(BUILD)/bench/tinyllama-1.1b \
	$(BUILD)/bench/falcon7b-2L $(BUILD)/bench/starcoder-1b \
	$(BUILD)/bench/mistral-7b-2l $(BUILD)/bench/deepseek-v2-lite-2l \
	$(BUILD)/bench/gemma-2-2b $(BUILD)/bench/qwen3-0.6b
# TinyLlama's shape as GGUF files in three storage types (bench/stored.c; F16 1.9 GB, Q8_0 1.0 GB,
# Q4_K_M's layout 0.6 GB); llama.cpp's llama-bench beside them with LLAMACPP=path/to/build/bin,
# whose llama-quantize then makes the Q8_0 and Q4_K_M files from the F16 one (*-lq.gguf)
BENCH_STORED = $(addprefix $(BUILD)/bench/tinyllama-1.1b.,f16.gguf q8_0.gguf q4_k_m.gguf)
# t5-base's shape with random weights (F32, 0.9 GB; fixtures/ref/t5_ref.py --shape), its own row
BENCH_T5 = $(BUILD)/bench/t5/models/t5-base
$(BENCH_T5)/config.json:
	/usr/bin/python3 fixtures/ref/t5_ref.py --shape t5-base $(BUILD)/bench/t5
ifneq ($(LLAMACPP),)
BENCH_STORED = $(addprefix $(BUILD)/bench/tinyllama-1.1b.,f16.gguf q8_0-lq.gguf q4_k_m-lq.gguf)
endif
# the Llama-3-8B shape at Q4_K_M's layout (4.9 GB, written once outside the clone): make bench-8b
BENCH_CACHE ?= $(HOME)/.cache/headscope
BENCH_8B = $(BENCH_CACHE)/llama-3-8b.q4_k_m.gguf
bench: all $(BUILD)/hs-bench $(BENCH_MODEL)/config.json $(BENCH_BERT)/config.json \
		$(addsuffix /config.json,$(BENCH_FAMILIES)) $(BENCH_STORED) $(BENCH_T5)/config.json
	LLAMACPP="$(LLAMACPP)" $(BUILD)/hs-bench $(BENCH_MODEL) $(BENCH_BERT) --family $(BENCH_FAMILIES) \
		--stored $(BENCH_STORED) --t5 $(BENCH_T5) --headscope $(BIN) \
		--torch bench/torch_forward.py --python /usr/bin/python3 $(BENCH_ARGS)

$(BUILD)/bench/tinyllama-1.1b.%.gguf: $(BUILD)/bench/tinyllama-1.1b/config.json | all
	$(BIN) convert $(<D) -o $@ --type $*
$(BUILD)/bench/tinyllama-1.1b.q4_k_m.gguf: $(BUILD)/bench/tinyllama-1.1b.f16.gguf
	/usr/bin/python3 bench/q4_k_m_layout.py $< $@
$(BUILD)/bench/tinyllama-1.1b.%-lq.gguf: $(BUILD)/bench/tinyllama-1.1b.f16.gguf
	'$(LLAMACPP)/llama-quantize' $< $@.tmp $(shell echo $* | tr a-z A-Z) > $@.log 2>&1
	mv $@.tmp $@

# the stored rows alone against llama.cpp (medians of BENCH_REPS runs), and the 8B row
BENCH_REPS ?= 3
bench-stored: all $(BUILD)/hs-bench $(BENCH_STORED)
	LLAMACPP="$(LLAMACPP)" $(BUILD)/hs-bench --stored-only --stored $(BENCH_STORED) \
		--reps $(BENCH_REPS) --headscope $(BIN)
bench-8b: all $(BUILD)/hs-bench $(BENCH_8B)
	$(BUILD)/hs-bench --stored-only --big $(BENCH_8B) --headscope $(BIN)
$(BENCH_8B): $(BUILD)/bench/tinyllama-1.1b.f16.gguf
	mkdir -p $(@D)
	/usr/bin/python3 bench/llama3_8b_layout.py $< $@

$(BUILD)/bench/roberta-base/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch roberta-base --out $(@D) \
		--tokenizer fixtures/tokenizer/families/roberta.tokenizer.json
$(BUILD)/bench/distilbert-base/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch distilbert-base --out $(@D) \
		--tokenizer fixtures/tokenizer/bert-uncased.tokenizer.json
$(BUILD)/bench/pythia-160m/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch pythia-160m --out $(@D) \
		--tokenizer fixtures/tokenizer/families/neox.tokenizer.json
# BF16, as TinyLlama is published (2.2 GB on disk, 4.4 GB as F32 in memory)
$(BUILD)/bench/tinyllama-1.1b/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch tinyllama-1.1b --dtype bf16 --out $(@D) \
		--tokenizer fixtures/tokenizer/families/llama2.tokenizer.json
# DeepSeek-V2-Lite's shape with 2 of its 27 layers (one dense, one of 64 experts), BF16
$(BUILD)/bench/deepseek-v2-lite-2l/config.json:
	/usr/bin/python3 fixtures/ref/make_mla_golden.py --bench $(@D)

# multi-query: Falcon-7B's shape cut to 2 of its 32 layers (the name says so), StarCoderBase-1B's
$(BUILD)/bench/falcon7b-2L/config.json:
	/usr/bin/python3 fixtures/ref/families_mqa.py --arch falcon-7b --layers 2 --dtype bf16 --out $(@D) \
		--tokenizer fixtures/tokenizer/families/falcon.tokenizer.json
$(BUILD)/bench/starcoder-1b/config.json:
	/usr/bin/python3 fixtures/ref/families_mqa.py --arch starcoderbase-1b --dtype bf16 --out $(@D) \
		--tokenizer fixtures/tokenizer/families/starcoder.tokenizer.json
# Mistral-7B-v0.1's shape with 2 of its 32 layers (BF16; its window of 4096 is past n = 512)
$(BUILD)/bench/mistral-7b-2l/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch mistral-7b-2l --dtype bf16 --out $(@D) \
		--tokenizer fixtures/tokenizer/families/llama2.tokenizer.json

# Gemma-2-2B and Qwen3-0.6B's shapes, BF16, random weights (fixtures/ref/make_norms_fixtures.py)
$(BUILD)/bench/gemma-2-2b/config.json:
	/usr/bin/python3 fixtures/ref/make_norms_fixtures.py --one gemma-2-2b --out $(@D) \
		--tokenizer fixtures/tokenizer/families/gemma.tokenizer.json
$(BUILD)/bench/qwen3-0.6b/config.json:
	/usr/bin/python3 fixtures/ref/make_norms_fixtures.py --one qwen3-0.6b --out $(@D) \
		--tokenizer fixtures/tokenizer/families/qwen2.tokenizer.json

$(BENCH_MODEL)/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch gpt2-small --out $(BENCH_MODEL) --tokenizer fixtures/tiny-gpt2

$(BENCH_BERT)/config.json:
	/usr/bin/python3 fixtures/ref/make_checkpoint.py --arch bert-base --out $(BENCH_BERT)

$(BUILD)/hs-bench: $(BENCH_SRC) bench/bench.h $(LIB) $(wildcard include/headscope/*.h)
	$(CC) $(CPPFLAGS) $(ALLCFLAGS) $(BENCH_SRC) $(LIB) $(PKG_LIBS) $(LDFLAGS) -o $@

include lib.mk

# the header dependencies of everything built so far (none on a first build)
DEPFILES = $(filter-out $(BUILD)/obj/gen/%,$(LIB_OBJ:.o=.d)) $(CLI_OBJ:.o=.d) $(TEST_BIN:=.d) \
           $(TEST_V3_BIN:=.d) $(REPLAY_BIN:=.d) $(V3_NN:.o=.d) $(V3_MODEL:.o=.d)
$(DEPFILES):
-include $(wildcard $(DEPFILES))

clean:
	rm -rf build build-san build-fuzz
