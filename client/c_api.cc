#include "client/c_api.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "client/attached_reader.h"
#include "client/c_api_internal.h"
#include "client/connection.h"
#include "client/daemon_queries.h"
#include "common/paths.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "shm/ring_layout.h"

struct zephon_reader {
  std::unique_ptr<zephon::client::AttachedReader> reader;
  // The process that attached. A forked child shares the mapping and the socket but
  // must never release its parent's loans or speak on its parent's gRPC stream.
  pid_t owner_pid;
};

namespace {

using zephon::client::c_api::Dup;
using zephon::client::c_api::Fail;
using zephon::client::c_api::OrEmpty;

absl::Status CheckOwner(const zephon_reader* reader) {
  if (reader->owner_pid == getpid()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "this Zephon reader belongs to process ", reader->owner_pid, "; process ", getpid(),
      " is a fork of it and cannot use its parent's batches (build a new Pipeline in the "
      "child)"));
}

// Refuses a zephon_batch whose caller declared another layout (see c_api.h, Versioning):
// writing sizeof(zephon_batch) bytes into a smaller struct would corrupt its memory.
absl::Status CheckBatchStructSize(uint32_t struct_size) {
  constexpr uint32_t kSize = sizeof(zephon_batch);
  if (struct_size == kSize) return absl::OkStatus();
  const std::string got = absl::StrCat("zephon_next: zephon_batch.struct_size is ", struct_size,
                                       " but this library (C API version ",
                                       ZEPHON_C_API_VERSION, ") has a ", kSize,
                                       "-byte zephon_batch; ");
  if (struct_size < kSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        got, "set struct_size = sizeof(zephon_batch) before the call, and rebuild the caller "
             "against this library's c_api.h if it was built against an older one"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      got, "the caller was built against a newer c_api.h: install the libzephon_c.so of "
           "the same build"));
}

absl::Duration Seconds(double s) { return s > 0 ? absl::Seconds(s) : absl::Seconds(60); }

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const char* socket_path,
                                                       const char* zephond_path, double timeout_s) {
  zephon::client::ConnectOptions options;
  options.socket_path = OrEmpty(socket_path);
  options.zephond_path = OrEmpty(zephond_path);
  options.timeout = Seconds(timeout_s);
  return zephon::client::ConnectOrStart(options);
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  print.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, print);
  return json;
}

}  // namespace

extern "C" {

int zephon_attach(const char* socket_path, const char* zephond_path, const char* request_json,
                  double timeout_s, zephon_reader** out, char** reply_json, char** error) {
  zephon::proto::AttachRequest request;
  google::protobuf::util::JsonParseOptions parse;
  auto parsed = google::protobuf::util::JsonStringToMessage(OrEmpty(request_json), &request, parse);
  if (!parsed.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("malformed attach request: ",
                                                        parsed.message().as_string())),
                error);
  }
  request.set_ring_abi_major(zephon::shm::kLayoutMajor);
  auto channel = Connect(socket_path, zephond_path, timeout_s);
  if (!channel.ok()) return Fail(channel.status(), error);
  const std::string socket =
      OrEmpty(socket_path).empty() ? zephon::DefaultSocketPath() : OrEmpty(socket_path);
  auto reader =
      zephon::client::AttachedReader::Attach(*channel, request, Seconds(timeout_s), socket);
  if (!reader.ok()) return Fail(reader.status(), error);
  if (reply_json != nullptr) *reply_json = Dup(ToJson((*reader)->reply()));
  *out = new zephon_reader{std::move(*reader), getpid()};
  return 0;
}

int zephon_next(zephon_reader* reader, double timeout_s, zephon_batch* out, char** error) {
  if (out == nullptr) {
    return Fail(absl::InvalidArgumentError("zephon_next: out (the zephon_batch) is NULL"), error);
  }
  if (absl::Status size = CheckBatchStructSize(out->struct_size); !size.ok()) {
    return Fail(size, error);
  }
  if (reader == nullptr) {
    return Fail(absl::InvalidArgumentError("zephon_next: reader is NULL (attach first)"), error);
  }
  if (absl::Status owner = CheckOwner(reader); !owner.ok()) return Fail(owner, error);
  absl::StatusOr<zephon::shm::SlotView> slot = reader->reader->Next(Seconds(timeout_s));
  if (!slot.ok()) return Fail(slot.status(), error);
  std::memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->seq = slot->seq;
  out->lane = slot->lane;
  out->lane_batch_index = slot->lane_batch_index;
  out->flags = slot->flags;
  const size_t n = std::min<size_t>(slot->tensors.size(), ZEPHON_MAX_TENSORS);
  out->num_tensors = static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& t = slot->tensors[i];
    zephon_tensor& dst = out->tensors[i];
    std::strncpy(dst.name, t.name.c_str(), sizeof(dst.name) - 1);
    dst.dtype = static_cast<int32_t>(t.dtype);
    dst.ndim = static_cast<int32_t>(std::min<size_t>(t.shape.size(), 4));
    for (int d = 0; d < dst.ndim; ++d) dst.shape[d] = t.shape[d];
    dst.data = t.data;
    dst.nbytes = t.bytes;
  }
  return 0;
}

int zephon_release(zephon_reader* reader, uint64_t seq, char** error) {
  if (absl::Status owner = CheckOwner(reader); !owner.ok()) return Fail(owner, error);
  absl::Status s = reader->reader->Release(seq);
  return s.ok() ? 0 : Fail(s, error);
}

uint64_t zephon_released(zephon_reader* reader) { return reader->reader->released(); }

uint64_t zephon_delivered(zephon_reader* reader) { return zephon_released(reader); }

int zephon_checkpoint(zephon_reader* reader, double timeout_s, char** data, uint64_t* size,
                      char** error) {
  char* warning = nullptr;
  const int code = zephon_checkpoint_noted(reader, timeout_s, data, size, &warning, error);
  std::free(warning);
  return code;
}

int zephon_checkpoint_noted(zephon_reader* reader, double timeout_s, char** data,
                            uint64_t* size, char** warning, char** error) {
  if (warning != nullptr) *warning = nullptr;
  if (absl::Status owner = CheckOwner(reader); !owner.ok()) return Fail(owner, error);
  absl::StatusOr<zephon::proto::CheckpointResult> result =
      reader->reader->CheckpointRound(Seconds(timeout_s));
  if (!result.ok()) return Fail(result.status(), error);
  const std::string& bytes = result->checkpoint();
  *data = static_cast<char*>(std::malloc(bytes.size() + 1));
  if (*data == nullptr) return Fail(absl::ResourceExhaustedError("out of memory"), error);
  std::memcpy(*data, bytes.data(), bytes.size());
  *size = bytes.size();
  if (warning != nullptr && !result->warning().empty()) *warning = Dup(result->warning());
  return 0;
}

int zephon_inspect_checkpoint(const char* data, uint64_t size, char** json, char** error) {
  if (data == nullptr && size > 0) {
    return Fail(absl::InvalidArgumentError("no checkpoint bytes (NULL data)"), error);
  }
  absl::StatusOr<zephon::proto::CheckpointState> state = zephon::checkpoint::DecodeCheckpoint(
      std::string_view(data == nullptr ? "" : data, size));
  if (!state.ok()) return Fail(state.status(), error);
  *json = Dup(ToJson(*state));
  return 0;
}

void zephon_ring_region(zephon_reader* reader, const void** base, uint64_t* bytes) {
  *base = reader->reader->mapping();
  *bytes = reader->reader->mapping_bytes();
}

void zephon_end_lease(zephon_reader* reader) {
  if (reader != nullptr && CheckOwner(reader).ok()) reader->reader->Detach();
}

void zephon_detach(zephon_reader* reader) {
  if (reader == nullptr) return;
  if (!CheckOwner(reader).ok()) {
    // In a forked child: tearing down would speak on the parent's stream. Leave the
    // (copy-on-write) memory to the child's exit.
    (void)reader->reader.release();
  }
  delete reader;
}

int zephon_explain(const char* socket_path, const char* instance_id, double timeout_s,
                   char** text, char** error) {
  auto channel = Connect(socket_path, nullptr, timeout_s);
  if (!channel.ok()) return Fail(channel.status(), error);
  auto explained = zephon::client::Explain(*channel, OrEmpty(instance_id), Seconds(timeout_s));
  if (!explained.ok()) return Fail(explained.status(), error);
  *text = Dup(*explained);
  return 0;
}

int zephon_status(const char* socket_path, double timeout_s, char** json, char** error) {
  auto channel = Connect(socket_path, nullptr, timeout_s);
  if (!channel.ok()) return Fail(channel.status(), error);
  auto reply = zephon::client::DaemonStatus(*channel, Seconds(timeout_s));
  if (!reply.ok()) return Fail(reply.status(), error);
  *json = Dup(ToJson(*reply));
  return 0;
}

void zephon_warm_up(void) {
  {
    // A channel that is never dialled: building it runs gRPC's init and its core
    // configuration; dropping it (the last one) shuts gRPC down again here, joining its
    // threads, so the process forks as cleanly as before.
    grpc::ChannelArguments args;
    auto channel = grpc::CreateCustomChannel("unix:/zephon-warm-up-never-dialled",
                                             grpc::InsecureChannelCredentials(), args);
  }
  zephon::proto::AttachRequest request;
  (void)google::protobuf::util::JsonStringToMessage(
      R"({"rank": {"global_rank": 0}, "spec": {"operators": [{}]}})", &request);
  (void)ToJson(zephon::proto::AttachReply());
}

uint32_t zephon_c_api_version(void) { return ZEPHON_C_API_VERSION; }

uint32_t zephon_ring_abi_major(void) { return zephon::shm::kLayoutMajor; }

void zephon_free(char* p) { std::free(p); }

}  // extern "C"
