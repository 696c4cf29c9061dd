// TestPool: a few threads draining a queue, a real executor for the parallel text and
// record conversions in tests (testonly). Submit refuses tasks once stopped, like a
// pool that is shutting down. Thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TEST_POOL_TESTING_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TEST_POOL_TESTING_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zephon::pipeline::testing {

class TestPool {
 public:
  explicit TestPool(int threads) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        while (true) {
          std::function<void()> task;
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;
            task = std::move(queue_.front());
            queue_.pop_front();
          }
          task();
        }
      });
    }
  }
  ~TestPool() {
    Stop();
    for (auto& t : threads_) t.join();
  }
  // Refuses tasks once stopped, like a pool that is shutting down.
  bool Submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
    queue_.push_back(std::move(task));
    ++submitted_;
    cv_.notify_one();
    return true;
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  int submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  int submitted_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace zephon::pipeline::testing

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TEST_POOL_TESTING_H_
