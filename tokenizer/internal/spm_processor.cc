#include "tokenizer/internal/spm_processor.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "tokenizer/internal/spm_shim.h"

namespace zephon::tokenizer::internal {

struct SpmShim {
  decltype(&zspm_load) load;
  decltype(&zspm_free) free;
  decltype(&zspm_piece_size) piece_size;
  decltype(&zspm_bos_id) bos_id;
  decltype(&zspm_eos_id) eos_id;
  decltype(&zspm_encode) encode;
  decltype(&zspm_decode) decode;
};

namespace {

void AppendBytes(void* context, const char* data, size_t size) {
  static_cast<std::string*>(context)->assign(data, size);
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string ReadLink(const char* path) {
  char buf[4096];
  const ssize_t n = readlink(path, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Where the shim may be, most specific first.
std::vector<std::string> Candidates() {
  const std::string name = SpmProcessor::kShimName;
  std::vector<std::string> out;
  if (const char* env = getenv("ZEPHON_SPM_SHIM"); env != nullptr && *env != '\0') {
    return {env};
  }
  // The object holding this code: libzephon_c.so, or the executable itself.
  Dl_info info{};
  std::string self;
  if (dladdr(reinterpret_cast<void*>(&AppendBytes), &info) != 0 && info.dli_fname != nullptr)
    self = info.dli_fname;
  const std::string exe = ReadLink("/proc/self/exe");
  if (self.empty() || self.find('/') == std::string::npos) self = exe;
  for (std::string dir = Dirname(self);; dir = Dirname(dir)) {
    const std::string base = dir == "/" ? "" : dir;
    out.push_back(base + "/" + name);
    out.push_back(base + "/tokenizer/" + name);
    if (dir == "/" || dir == "." || out.size() >= 16) break;
  }
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = getenv(var); dir != nullptr && *dir != '\0')
      out.push_back(std::string(dir) + "/zephon/tokenizer/" + name);
  }
  if (!exe.empty()) out.push_back(exe + ".runfiles/zephon/tokenizer/" + name);
  return out;
}

struct ShimOrError {
  SpmShim shim{};
  std::string error;  // empty when shim is usable
};

ShimOrError OpenShim() {
  ShimOrError result;
  std::string tried;
  for (const std::string& path : Candidates()) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // A new link namespace: the shim's libsentencepiece (with its protobuf 3.14), libstdc++
    // and libc never bind to, or interpose on, this process's.
    void* handle = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      result.error = "cannot load the SentencePiece shim " + path + " in a new link namespace (" +
                     (why != nullptr ? why : "dlmopen failed") +
                     "); it needs Debian's libsentencepiece0 (apt-get install libsentencepiece0)";
      return result;
    }
    bool ok = true;
    auto sym = [&](const char* symbol) {
      void* p = dlsym(handle, symbol);
      if (p == nullptr) ok = false;
      return p;
    };
    auto version = reinterpret_cast<decltype(&zspm_abi_version)>(sym("zspm_abi_version"));
    SpmShim& s = result.shim;
    s.load = reinterpret_cast<decltype(s.load)>(sym("zspm_load"));
    s.free = reinterpret_cast<decltype(s.free)>(sym("zspm_free"));
    s.piece_size = reinterpret_cast<decltype(s.piece_size)>(sym("zspm_piece_size"));
    s.bos_id = reinterpret_cast<decltype(s.bos_id)>(sym("zspm_bos_id"));
    s.eos_id = reinterpret_cast<decltype(s.eos_id)>(sym("zspm_eos_id"));
    s.encode = reinterpret_cast<decltype(s.encode)>(sym("zspm_encode"));
    s.decode = reinterpret_cast<decltype(s.decode)>(sym("zspm_decode"));
    if (!ok || version() != ZSPM_ABI_VERSION) {
      result.error = "the SentencePiece shim " + path +
                     " is from another build of Zephon (missing symbols or ABI version); "
                     "rebuild and reinstall it with `make build`";
    }
    return result;
  }
  result.error = std::string("the SentencePiece shim ") + SpmProcessor::kShimName +
                 " was not found (tried " + tried +
                 "); `make build` installs it next to libzephon_c.so, or set ZEPHON_SPM_SHIM "
                 "to its path";
  return result;
}

// Loaded once per process and never unloaded.
const ShimOrError& Shim() {
  static const ShimOrError* const shim = new ShimOrError(OpenShim());
  return *shim;
}

}  // namespace

SpmProcessor::SpmProcessor(const SpmShim* shim, zspm_model* model) : shim_(shim), model_(model) {}

SpmProcessor::~SpmProcessor() { shim_->free(model_); }

bool SpmProcessor::ShimAvailable(std::string* error) {
  if (Shim().error.empty()) return true;
  *error = Shim().error;
  return false;
}

std::unique_ptr<SpmProcessor> SpmProcessor::Load(std::string_view model_bytes,
                                                 std::string* error) {
  const ShimOrError& shim = Shim();
  if (!shim.error.empty()) {
    *error = shim.error;
    return nullptr;
  }
  zspm_model* model =
      shim.shim.load(model_bytes.data(), model_bytes.size(), &AppendBytes, error);
  if (model == nullptr) return nullptr;
  return std::unique_ptr<SpmProcessor>(new SpmProcessor(&shim.shim, model));
}

bool SpmProcessor::Encode(std::string_view text, std::vector<int>* ids,
                          std::string* error) const {
  struct Out {
    std::vector<int>* ids;
    std::string* error;
  } out{ids, error};
  const auto sink_ids = [](void* context, const int* data, size_t size) {
    static_cast<Out*>(context)->ids->assign(data, data + size);
  };
  const auto sink_error = [](void* context, const char* data, size_t size) {
    static_cast<Out*>(context)->error->assign(data, size);
  };
  return shim_->encode(model_, text.data(), text.size(), sink_ids, sink_error, &out) == 0;
}

bool SpmProcessor::Decode(const std::vector<int>& ids, std::string* text,
                          std::string* error) const {
  struct Out {
    std::string* text;
    std::string* error;
  } out{text, error};
  const auto sink_text = [](void* context, const char* data, size_t size) {
    static_cast<Out*>(context)->text->assign(data, size);
  };
  const auto sink_error = [](void* context, const char* data, size_t size) {
    static_cast<Out*>(context)->error->assign(data, size);
  };
  return shim_->decode(model_, ids.data(), ids.size(), sink_text, sink_error, &out) == 0;
}

int SpmProcessor::piece_size() const { return shim_->piece_size(model_); }
int SpmProcessor::bos_id() const { return shim_->bos_id(model_); }
int SpmProcessor::eos_id() const { return shim_->eos_id(model_); }

}  // namespace zephon::tokenizer::internal
