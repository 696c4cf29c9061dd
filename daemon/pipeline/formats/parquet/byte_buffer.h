// ByteBuffer: a reusable byte array that is not zero-filled when it grows. The reader's
// chunk and page buffers live for the whole file and are overwritten by every read or
// decompression; std::string::resize would memset each page first, which cost more than
// decompressing it. Buffers of 1 MiB and more are 2 MiB-aligned and advised as huge
// pages (MADV_HUGEPAGE): a writer's pages reach tens of MB (DuckDB writes one page per
// row group), and faulting them in 4 KiB at a time cost a third of the decode.
// Thread-compatible.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_BYTE_BUFFER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_BYTE_BUFFER_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>

namespace zephon::pipeline::parquet {

class ByteBuffer {
 public:
  // n writable bytes (contents unspecified), valid until the next Resize.
  char* Resize(size_t n) {
    if (n > capacity_) {
      // Grow by at least half again: pages of one file differ slightly in size, and
      // each reallocation maps fresh memory.
      const size_t grown = capacity_ + capacity_ / 2;
      Allocate(n > grown ? n : grown);
    }
    size_ = n;
    return data_.get();
  }
  std::string_view view() const { return {data_.get(), size_}; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;

  void Allocate(size_t n) {
    data_.reset();
    void* p = nullptr;
    if (n >= kHuge / 2) {
      n = (n + kHuge - 1) / kHuge * kHuge;
      if (posix_memalign(&p, kHuge, n) != 0) throw std::bad_alloc();
      madvise(p, n, MADV_HUGEPAGE);  // advice only: a refusal leaves 4 KiB pages
    } else {
      p = std::malloc(n);
      if (p == nullptr) throw std::bad_alloc();
    }
    data_.reset(static_cast<char*>(p));
    capacity_ = n;
  }

  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_BYTE_BUFFER_H_
