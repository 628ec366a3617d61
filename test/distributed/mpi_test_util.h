// Shared pieces of the multi-process test binaries mpi_test and
// mpi_training_test (run by CTest under mpirun,
// test/distributed/tests.cmake): the EXPECT macros that count
// failures on each rank, tensor helpers, the checkpointed model several
// modes share, and one entry point per file of modes. mpi_test_main.cc
// lists the modes and dispatches them.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/file_system.h"
#include "varstate/varstate.h"

namespace varstate::mpi_test {

// This process's rank (0 in the single-process modes) and its failures.
inline int g_rank = -1;
inline int g_failures = 0;
using Jobs = std::map<std::string, std::vector<std::string>>;

#define EXPECT(cond)                                                                           \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ++g_failures;                                                                            \
      std::fprintf(stderr, "[rank %d] %s:%d: EXPECT failed: %s\n", g_rank, __FILE__, __LINE__, \
                   #cond);                                                                     \
    }                                                                                          \
  } while (0)

// Expects `f` to throw E whose message contains every one of `texts`.
template <class E>
void expect_throws(const std::function<void()>& f, const std::vector<std::string>& texts,
                   int line) {
  try {
    f();
  } catch (const E& e) {
    for (const std::string& text : texts) {
      if (std::string(e.what()).find(text) == std::string::npos) {
        ++g_failures;
        std::fprintf(stderr, "[rank %d] line %d: message \"%s\" lacks \"%s\"\n", g_rank, line,
                     e.what(), text.c_str());
      }
    }
    return;
  } catch (const std::exception& e) {
    ++g_failures;
    std::fprintf(stderr, "[rank %d] line %d: wrong exception: %s\n", g_rank, line, e.what());
    return;
  }
  ++g_failures;
  std::fprintf(stderr, "[rank %d] line %d: no exception (expected \"%s\")\n", g_rank, line,
               texts.empty() ? "" : texts.front().c_str());
}
#define EXPECT_THROWS(E, stmt, ...) expect_throws<E>([&] { stmt; }, {__VA_ARGS__}, __LINE__)

bool same(const Tensor& a, const Tensor& b);

template <class T>
Tensor make(std::vector<int64_t> dims, const std::function<T(int64_t)>& f) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(i);
  return Tensor::from_vector<T>(v, TensorShape(std::move(dims)));
}

Tensor i64(std::vector<int64_t> v);
int world_size();
// Sums the failures of every rank, shuts `cluster` down (when given) and
// returns the exit code; rank 0 prints the verdict.
int finish(Cluster* cluster);

// Flips one byte of `path` at `offset`.
void corrupt_byte(const std::string& path, long offset);
// Entries of `dir` holding "_temp_", and checkpoint indexes in it.
int temporaries(const std::string& dir);
int indexes(const std::string& dir);

// ---------------------------------------------------------------------------
// The checkpointed model: its variables and their known values.

Tensor w_value();
Tensor emb_value();

struct Model {
  Variable w;
  PartitionedVariable emb;
  Variable step;
};

Model build_model(int emb_parts);
void set_model(Model& m, int64_t step);
void check_model(const Model& m, int64_t step);

// A FileSystem that ends the process after `limit` data bytes of a shard:
// a task dying in the middle of writing its part of a checkpoint.
class DyingFileSystem : public FileSystem {
 public:
  explicit DyingFileSystem(size_t limit) : limit_(limit) {}
  bool armed = false;
  std::unique_ptr<WritableFile> new_writable_file(const std::string& path) override {
    auto inner = base().new_writable_file(path);
    if (!armed || path.find(".data-") == std::string::npos) return inner;
    return std::make_unique<Dying>(std::move(inner), limit_);
  }
  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& p) override {
    return base().new_random_access_file(p);
  }
  bool file_exists(const std::string& p) override { return base().file_exists(p); }
  uint64_t file_size(const std::string& p) override { return base().file_size(p); }
  void delete_file(const std::string& p) override { base().delete_file(p); }
  void rename_file(const std::string& a, const std::string& b) override {
    base().rename_file(a, b);
  }
  std::vector<std::string> list_dir(const std::string& d) override { return base().list_dir(d); }
  void create_dir(const std::string& d) override { base().create_dir(d); }
  void delete_dir(const std::string& d) override { base().delete_dir(d); }
  void sync_dir(const std::string& d) override { base().sync_dir(d); }

 private:
  static FileSystem& base() { return *default_file_system(); }
  class Dying : public WritableFile {
   public:
    Dying(std::unique_ptr<WritableFile> inner, size_t limit)
        : inner_(std::move(inner)), left_(limit) {}
    void append(const void* data, size_t n) override {
      if (n >= left_) {
        inner_->append(data, left_);
        inner_->sync();
        std::fprintf(stderr, "[rank %d] dying mid-save, as the test asks\n", g_rank);
        _exit(3);
      }
      left_ -= n;
      inner_->append(data, n);
    }
    void sync() override { inner_->sync(); }
    void close() override { inner_->close(); }
    const std::string& path() const override { return inner_->path(); }

   private:
    std::unique_ptr<WritableFile> inner_;
    size_t left_;
  };
  size_t limit_;
};

// ---------------------------------------------------------------------------
// The modes, by file; each returns the process's exit code.

// mpi_test_ops.cc
int run_ops();
int run_sparse();
// mpi_test_checkpoint.cc: "check" and "check_killed" run without MPI.
int run_check(const std::string& mode, const std::string& dir);
int run_checkpoint(const std::string& mode, const std::string& dir);
// mpi_test_failure.cc
int run_failure(const std::string& mode, const std::string& dir);
// mpi_test_reshard.cc
int run_reshard(const std::string& mode, const std::string& dir);
// mpi_test_incremental.cc
int run_incremental(const std::string& mode, const std::string& dir);

}  // namespace varstate::mpi_test
