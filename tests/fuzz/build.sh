#!/bin/bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzzer.cc) with clang-14 and
# -fsanitize=fuzzer,address,undefined, straight from the sources each one needs: Bazel
# here builds with gcc, which has no libFuzzer. Only the project sources listed per
# target are instrumented; system libraries (Abseil, protobuf, zlib) are linked as they
# come from Debian. `make fuzz` runs this, then tests/fuzz/run.sh.
#
# Usage: tests/fuzz/build.sh OUT_DIR [TARGET...]   (default: every target)
set -euo pipefail

out=${1:?usage: tests/fuzz/build.sh OUT_DIR [TARGET...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
CXX=${CXX:-clang++-14}
if ! command -v "$CXX" >/dev/null; then
  echo "build.sh: $CXX not found; as root: apt-get install clang-14 (make fuzz does this)" >&2
  exit 1
fi
mkdir -p "$out/gen"
out=$(cd "$out" && pwd)

# Same Abseil libraries as third_party/sys:absl.
ABSL_LIBS="-labsl_statusor -labsl_status -labsl_cord -labsl_cordz_info -labsl_cord_internal
  -labsl_cordz_functions -labsl_cordz_handle -labsl_str_format_internal -labsl_synchronization
  -labsl_graphcycles_internal -labsl_symbolize -labsl_debugging_internal
  -labsl_demangle_internal -labsl_stacktrace -labsl_malloc_internal -labsl_time
  -labsl_civil_time -labsl_time_zone -labsl_strings -labsl_strings_internal -labsl_int128
  -labsl_throw_delegate -labsl_raw_logging_internal -labsl_log_severity -labsl_spinlock_wait
  -labsl_base -lpthread"

# The protobuf messages the checkpoint decoder needs, generated as Bazel's genrule does.
protoc -I"$root" --cpp_out="$out/gen" "$root/proto/checkpoint.proto" "$root/proto/spec.proto"

declare -A SRCS LIBS
SRCS[ring_reader]="shm/ring_reader.cc shm/segment.cc shm/futex.cc"
LIBS[ring_reader]="-lrt"
SRCS[checkpoint_decode]="daemon/checkpoint/checkpoint_file.cc $out/gen/proto/checkpoint.pb.cc $out/gen/proto/spec.pb.cc"
LIBS[checkpoint_decode]="-lprotobuf -lz"
SRCS[megatron_idx]="daemon/pipeline/formats/megatron_reader.cc daemon/pipeline/formats/shard_file.cc daemon/pipeline/formats/tokens.cc"
LIBS[megatron_idx]=""
SRCS[json_scan]="daemon/pipeline/formats/json_scan.cc"
LIBS[json_scan]="-lsimdjson"
SRCS[mds]="daemon/pipeline/formats/mds/mds_decompress.cc daemon/pipeline/formats/mds/mds_encoding.cc daemon/pipeline/formats/mds/mds_hash.cc daemon/pipeline/formats/mds/mds_index.cc daemon/pipeline/formats/mds/mds_records.cc daemon/pipeline/formats/mds/mds_sample_table.cc daemon/pipeline/formats/shard_file.cc common/digest.cc"
# (-D: the defines of third_party/sys:spdlog; they apply wherever they stand on the line)
LIBS[mds]="-lsimdjson -lzstd -lz -lbz2 -lbrotlidec -lsnappy -lxxhash -lcrypto -lspdlog -lfmt -DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB"
P=daemon/pipeline/formats/parquet
SRCS[parquet]="$P/thrift_compact.cc $P/metadata.cc $P/codecs.cc $P/encodings.cc $P/schema.cc $P/column_chunk_reader.cc $P/parquet_records.cc daemon/pipeline/formats/shard_file.cc"
LIBS[parquet]="-lsnappy -llz4 -lbrotlidec -lzstd -lz"
SRCS[s3_xml]="daemon/storage/s3_xml.cc"
LIBS[s3_xml]="-lpugixml"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ring_reader checkpoint_decode megatron_idx json_scan s3_xml mds parquet)
cd "$root"
for t in "${targets[@]}"; do
  [ -n "${SRCS[$t]+x}" ] || { echo "build.sh: unknown target $t" >&2; exit 1; }
  echo "building $out/${t}_fuzzer"
  # shellcheck disable=SC2086  # the lists are word-split on purpose
  "$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$root" -I"$out/gen" \
    "tests/fuzz/${t}_fuzzer.cc" ${SRCS[$t]} \
    -o "$out/${t}_fuzzer" ${LIBS[$t]} $ABSL_LIBS
done
