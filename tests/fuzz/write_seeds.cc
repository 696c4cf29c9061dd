// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from the
// real writers: RingWriter rings in several states, EncodeCheckpoint output, shards from
// the Megatron test writer, plus hand-made edge cases (truncations, newer versions,
// escapes, deep nesting). Run by `make fuzz-seeds` (bazel run); the output is committed,
// and libFuzzer adds what it finds to a scratch copy, not to these directories.
//
// Usage: write_seeds OUT_DIR   (creates OUT_DIR/<target>/seed-*).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "shm/ring_reader.h"
#include "shm/ring_writer.h"
#include "shm/segment.h"
#include "shm/unique_fd.h"

namespace {

namespace fs = std::filesystem;
using zephon::shm::DType;
using zephon::shm::RingWriter;

void Die(const std::string& what) {
  std::fprintf(stderr, "write_seeds: %s\n", what.c_str());
  std::exit(1);
}
void Ok(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) Die(absl::StrCat("cannot write ", (dir / name).string()));
}

std::string Le(uint64_t v, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(v >> (8 * i));
  return out;
}

// ---- ring_reader: [u64 generation][u32 reader index][u32 lease epoch][u32 data_bytes]
//      [data segment][cursor segment] ---------------------------------------------------

// All bytes of `fd` (a segment as a reader receives it), via pread: no mapping needed.
std::string ReadAll(const zephon::shm::UniqueFd& fd, const std::string& what) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) Die(absl::StrCat("fstat ", what));
  std::string out(static_cast<size_t>(st.st_size), '\0');
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = ::pread(fd.get(), out.data() + done, out.size() - done,
                              static_cast<off_t>(done));
    if (n <= 0) Die(absl::StrCat("read ", what));
    done += static_cast<size_t>(n);
  }
  return out;
}

std::string RingInput(uint64_t generation, uint32_t index, uint32_t epoch,
                      const std::string& data, const std::string& cursors) {
  return absl::StrCat(Le(generation, 8), Le(index, 4), Le(epoch, 4), Le(data.size(), 4), data,
                      cursors);
}

// The input for `writer`'s ring as a reader with lease (index, epoch) sees it: both
// segments through the descriptors zephond would hand over.
std::string RingInput(const RingWriter& writer, uint32_t index, uint32_t epoch) {
  auto fds = writer.ReaderFds();
  Ok(fds.status(), "reader fds");
  return RingInput(writer.generation(), index, epoch, ReadAll(fds->data, "data segment"),
                   ReadAll(fds->cursors, "cursor segment"));
}

void PublishBatch(RingWriter* writer, uint32_t lane, uint64_t batch) {
  auto slot = writer->Loan(absl::Seconds(5));
  Ok(slot.status(), "loan");
  auto tokens = slot->AddTensor("tokens", DType::kInt32, {2, 3});
  Ok(tokens.status(), "tokens");
  for (int i = 0; i < 6; ++i) static_cast<int32_t*>(*tokens)[i] = i + 10 * lane;
  auto mask = slot->AddTensor("loss_mask", DType::kUInt8, {2, 3});
  Ok(mask.status(), "mask");
  std::memset(*mask, 1, 6);
  slot->set_lane(lane);
  slot->set_lane_batch_index(batch);
  Ok(writer->Publish(*std::move(slot)), "publish");
}

void RingSeeds(const fs::path& dir) {
  const std::string name = absl::StrCat("zephon-fuzz-seed.", ::getpid());
  int n = 0;
  auto seed = [&](const std::string& bytes) { Write(dir, absl::StrCat("seed-", n++), bytes); };
  {  // Two slots, one attached reader, two batches published: the common case.
    auto writer = RingWriter::Create(name, {2, 256, 1}, "fuzz-seed");
    Ok(writer.status(), "create");
    auto lease = (*writer)->AttachReader(0, ::getpid(), 0, std::nullopt);
    Ok(lease.status(), "attach");
    PublishBatch(writer->get(), 0, 0);
    PublishBatch(writer->get(), 1, 0);
    auto fds = (*writer)->ReaderFds();
    Ok(fds.status(), "reader fds");
    const std::string data = ReadAll(fds->data, "data segment");
    const std::string cursors = ReadAll(fds->cursors, "cursor segment");
    const uint64_t gen = (*writer)->generation();
    const uint32_t index = lease->index, epoch = lease->lease_epoch;
    seed(RingInput(gen, index, epoch, data, cursors));
    // Header only: total_bytes exceeds the mapping.
    seed(RingInput(gen, index, epoch, data.substr(0, 4096), cursors));
    // Last slot cut off.
    seed(RingInput(gen, index, epoch, data.substr(0, data.size() - 4096), cursors));
    // Another generation expected.
    seed(RingInput(gen ^ 1, index, epoch, data, cursors));
    // Cursor segment cut to its header (reader table beyond the mapping), then missing.
    seed(RingInput(gen, index, epoch, data, cursors.substr(0, 4096)));
    seed(RingInput(gen, index, epoch, data, ""));
    // The cursor segment of another ring (generation mismatch in the cursor header).
    std::string foreign = cursors;
    foreign[16] ^= 1;
    seed(RingInput(gen, index, epoch, data, foreign));
    // A layout-1 ring (major 1; its reader table lived in the one segment): refused,
    // naming both versions.
    std::string old_major = data;
    old_major[8] = 1;
    old_major[9] = 0;
    seed(RingInput(gen, index, epoch, old_major, cursors));
  }
  {  // Four slots, two readers, end of stream after one batch.
    auto writer = RingWriter::Create(name, {4, 256, 2}, "fuzz-seed-eos");
    Ok(writer.status(), "create");
    auto lease = (*writer)->AttachReader(3, ::getpid(), 0, std::nullopt);
    Ok(lease.status(), "attach");
    PublishBatch(writer->get(), 0, 7);
    Ok((*writer)->PublishEndOfStream(absl::Seconds(5)), "eos");
    seed(RingInput(**writer, lease->index, lease->lease_epoch));
    (*writer)->Poison(3, "rank 3 lost: fuzz seed");
    seed(RingInput(**writer, lease->index, lease->lease_epoch));
  }
  {  // Two slots wrapped around once (seq 2 and 3 live); then the same ring closed.
    auto writer = RingWriter::Create(name, {2, 192, 1}, "fuzz-seed-wrap");
    Ok(writer.status(), "create");
    auto lease = (*writer)->AttachReader(0, ::getpid(), 0, std::nullopt);
    Ok(lease.status(), "attach");
    auto fds = (*writer)->ReaderFds();
    Ok(fds.status(), "reader fds");
    auto reader = zephon::shm::RingReader::Open(*std::move(fds), name, lease->index,
                                                lease->lease_epoch, (*writer)->generation(),
                                                absl::Seconds(5));
    Ok(reader.status(), "reader");
    for (uint64_t b = 0; b < 4; ++b) {
      PublishBatch(writer->get(), 0, b);
      if (b < 2) {
        auto view = (*reader)->Acquire(absl::Seconds(5));
        Ok(view.status(), "acquire");
        Ok((*reader)->Release(view->seq), "release");
      }
    }
    // Leaves the reader's cursor at 2: the seed starts from a wrapped ring.
    seed(RingInput(**writer, lease->index, lease->lease_epoch));
    (*writer)->Close();
    seed(RingInput(**writer, lease->index, lease->lease_epoch));
  }
  seed(std::string(20, '\0'));  // both segments empty
  seed(absl::StrCat(std::string(16, '\0'), Le(4096, 4), "ZEPHRING", std::string(4088, '\0'),
                    "ZEPHCURS", std::string(4088, '\0')));
}

// ---- checkpoint_decode: EncodeCheckpoint output and damaged variants -------------------

void CheckpointSeeds(const fs::path& dir) {
  using zephon::checkpoint::EncodeCheckpoint;
  zephon::proto::CheckpointState small;
  small.set_format_version(zephon::checkpoint::kCheckpointFormatVersion);
  small.set_run_id("run-fuzz");
  small.set_spec_hash("0123456789abcdef");
  small.set_canonical_replicas(2);
  small.set_seed(42);
  for (uint32_t lane = 0; lane < 2; ++lane) {
    auto* l = small.add_lanes();
    l->set_lane(lane);
    l->set_next_batch_index(5 + lane);
    l->set_flush_group_chunk(3);
    l->set_records_into_group(lane);
  }
  small.set_round(4);
  small.set_world_size(4);
  small.set_dp_degree(2);
  for (uint32_t r = 0; r < 4; ++r) {
    auto* rank = small.add_ranks();
    rank->set_global_rank(r);
    rank->set_dp_degree(2);
    rank->set_dp_group_id(r / 2);
    rank->set_taken(6);
    rank->set_instance_id(absl::StrCat("inst-", r));
    rank->set_daemon("node-0");
  }
  small.set_created_unix_ms(1700000000000);
  small.set_total_batches(11);
  const std::string good = EncodeCheckpoint(small);
  Write(dir, "seed-0", good);
  zephon::proto::CheckpointState minimal;
  minimal.set_format_version(1);
  Write(dir, "seed-1", EncodeCheckpoint(minimal));
  zephon::proto::CheckpointState newer = small;
  newer.set_format_version(2);
  Write(dir, "seed-2", EncodeCheckpoint(newer));
  Write(dir, "seed-3", good.substr(0, good.size() - 3));  // truncated payload
  Write(dir, "seed-4", good.substr(0, 20));                // truncated header
  Write(dir, "seed-5", good + "x");                        // trailing byte
  std::string flipped = good;
  flipped[40] ^= 0x20;  // CRC mismatch
  Write(dir, "seed-6", flipped);
  Write(dir, "seed-7", "ZEPH");
}

// ---- megatron_idx: [u32 .bin size][.idx] from the test writer ------------------------

void MegatronSeeds(const fs::path& dir) {
  const std::string tmp = zephon::pipeline::testing::MakeTempDir("fuzz-megatron-seeds");
  int n = 0;
  for (uint8_t code : {1, 2, 3, 4, 5, 8}) {
    const std::string prefix = absl::StrCat(tmp, "/shard", int{code});
    Ok(zephon::pipeline::testing::WriteMegatronShard(prefix, {{1, 2, 3}, {4}, {5, 6, 7, 8}, {}},
                                                     code),
       "megatron");
    const uint64_t bin_bytes = fs::file_size(prefix + ".bin");
    std::ifstream in(prefix + ".idx", std::ios::binary);
    const std::string idx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Write(dir, absl::StrCat("seed-", n++), Le(bin_bytes, 4) + idx);
    if (code == 8) {
      Write(dir, absl::StrCat("seed-", n++), Le(bin_bytes - 1, 4) + idx);  // .bin too short
      Write(dir, absl::StrCat("seed-", n++), Le(bin_bytes, 4) + idx.substr(0, 40));
    }
  }
  fs::remove_all(tmp);
}

// ---- json_scan: JSONL lines ------------------------------------------------------------

void JsonSeeds(const fs::path& dir) {
  const std::vector<std::string> lines = {
      R"({"input_ids": [1, 2, 3]})",
      R"({"text": "h\u00e9llo \ud83d\ude00 \"q\" \\ \/", "input_ids": [0, 2147483647]})",
      R"( {"meta": {"input_ids": [9, 9], "deep": [[[{"x": null}]], true, false]}, "input_ids": [ 0 , 1 ], "after": []} )",
      R"({"input\u005fids": [], "n": -0.5e+10, "z": 0, "f": 1.25E-3})",
      R"({"input_ids": [1], "input_ids": [2]})",
      R"({"input_ids": [2147483648]})",
      R"({"input_ids": [1, 2.5, -1, "x"]})",
      R"({"a": "\ud800", "input_ids": [7]})",
      std::string(300, '[') + std::string(300, ']'),
      absl::StrCat("{\"d\":", std::string(250, '['), std::string(250, ']'), ",\"input_ids\":[1]}"),
  };
  for (size_t i = 0; i < lines.size(); ++i) Write(dir, absl::StrCat("seed-", i), lines[i]);
}

// ---- s3_xml: response bodies -----------------------------------------------------------

void S3XmlSeeds(const fs::path& dir) {
  const std::vector<std::string> bodies = {
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;1</NextContinuationToken>"
      "<Contents><Key>p/a&amp;b.bin</Key><LastModified>2024-01-02T03:04:05.000Z"
      "</LastModified><ETag>&quot;x&quot;</ETag><Size>12</Size></Contents>"
      "<Contents><Key>p/c</Key><LastModified>bad</LastModified><Size>0</Size></Contents>"
      "</ListBucketResult>",
      "<ListBucketResult><Name>b</Name><Prefix>p/</Prefix><Delimiter>/</Delimiter>"
      "<IsTruncated>false</IsTruncated>"
      "<Contents><Key>p/top.bin</Key><Size>3</Size></Contents>"
      "<CommonPrefixes><Prefix>p/a&amp;b/</Prefix></CommonPrefixes>"
      "<CommonPrefixes>\n  <Prefix>p/sub/</Prefix>\n</CommonPrefixes>"
      "<CommonPrefixes/>"
      "</ListBucketResult>",
      "<ListBucketResult><Contents><Key>k&#233;&#x1F600;&#0;&#xD800;&bogus;&#x110000;</Key>"
      "<Size>18446744073709551615</Size><LastModified>2024-01-02T03:04:05+02:00</LastModified>"
      "</Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key>k</Key><Size>x</Size></Contents></ListBucketResult>",
      "<ListBucketResult><CommonPrefixes><Prefix></Prefix></CommonPrefixes></ListBucketResult>",
      "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist"
      "</Message><BucketName>b</BucketName></Error>",
      "<Error><Code>SlowDown</Code></Error>",
      "<ListBucketResult><Contents><Key/><Keys>x</Keys><Key",
  };
  for (size_t i = 0; i < bodies.size(); ++i) Write(dir, absl::StrCat("seed-", i), bodies[i]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) Die("usage: write_seeds OUT_DIR");
  const fs::path out = argv[1];
  RingSeeds(out / "ring_reader");
  CheckpointSeeds(out / "checkpoint_decode");
  MegatronSeeds(out / "megatron_idx");
  JsonSeeds(out / "json_scan");
  S3XmlSeeds(out / "s3_xml");
  std::printf("seeds written under %s\n", out.c_str());
  return 0;
}
