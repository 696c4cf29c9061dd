// Buffers that are not zero-filled when they grow: ByteBuffer (a page's bytes) and
// PodVector (a page's levels and values). The reader's buffers live for the whole file
// and are overwritten by every read, decompression and decode; std::string::resize and
// std::vector::resize would memset each page first, which cost more than decoding it.
// Buffers of 1 MiB and more are 2 MiB-aligned and advised as huge pages
// (MADV_HUGEPAGE): a writer's pages reach tens of MB (DuckDB writes one page per row
// group and column), and faulting them in 4 KiB at a time cost a third of the decode.
// Thread-compatible.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_BYTE_BUFFER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_BYTE_BUFFER_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace zephon::pipeline::parquet {

// n bytes from malloc, or huge-page-advised 2 MiB-aligned ones (rounded up) for
// n >= 1 MiB; released with std::free. Throws std::bad_alloc as operator new does.
inline void* AllocateBuffer(size_t n) {
  constexpr size_t kHuge = size_t{2} << 20;
  void* p = nullptr;
  if (n >= kHuge / 2) {
    const size_t rounded = (n + kHuge - 1) / kHuge * kHuge;
    if (posix_memalign(&p, kHuge, rounded) != 0) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a refusal leaves 4 KiB pages
    return p;
  }
  p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// A std::allocator whose value-less construct leaves trivial types uninitialized, so
// that resize() does not zero-fill, and whose large blocks come from AllocateBuffer.
template <typename T>
struct UninitializedAllocator {
  using value_type = T;
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(AllocateBuffer(n * sizeof(T))); }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const UninitializedAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const UninitializedAllocator<U>&) const { return false; }
};

template <typename T>
using PodVector = std::vector<T, UninitializedAllocator<T>>;

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
  void Allocate(size_t n) {
    data_.reset();
    data_.reset(static_cast<char*>(AllocateBuffer(n)));
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
