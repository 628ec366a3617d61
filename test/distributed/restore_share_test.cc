// RestoreShare (checkpoint/restore_share.h) in one process, each "task" a
// RestoreShare of its own rank over the same items: every task reads only
// its ranges of the stored pieces, and the joined checksums catch a corrupt
// byte anywhere in a piece, whoever read it (or nobody: a gap).
#include <catch2/catch.hpp>

#include <cstdio>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/file_system.h"
#include "checkpoint/restore_share.h"
#include "varstate/saver.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using internal::RestoreShare;
using internal::ShareItem;
using testing::TempDir;

std::vector<float> iota(int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f - 3.f;
  return out;
}

// A [40, 3] float table saved in 2 parts (rows 0-19 at bytes 0-239 of the
// one data file, rows 20-39 at 240-479).
std::string save_table(const TempDir& dir) {
  reset_default_graph();
  Session sess;
  PartitionedVariable t =
      get_variable("t", {.initializer = Tensor::from_vector<float>(iota(120), {40, 3}),
                         .partitioner = fixed_size_partitioner(2)});
  sess.run(global_variables_initializer());
  return *Saver().save(sess, dir / "ckpt").path();
}

void flip_byte(const std::string& path, long offset) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  std::fseek(f, offset, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, offset, SEEK_SET);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
}

// Every task reads, the checksums are exchanged, every task verifies: the
// verdict of task 0 (all tasks' verdicts are compared).
std::optional<RestoreShare::Failure> restore(std::vector<std::unique_ptr<RestoreShare>>& tasks) {
  std::vector<std::vector<uint32_t>> by_rank;
  for (auto& t : tasks) by_rank.push_back(t->read());
  std::optional<RestoreShare::Failure> first = tasks[0]->verify(by_rank);
  for (auto& t : tasks) {
    const auto v = t->verify(by_rank);
    CHECK(v.has_value() == first.has_value());
    if (v && first) CHECK(v->message == first->message);
  }
  return first;
}

TEST_CASE("RestoreShare: 2 stored pieces into 4 tasks, each reading only its rows",
          "[distributed][restore]") {
  TempDir dir;
  const std::string path = save_table(dir);
  reset_default_graph();
  Session sess;
  PartitionedVariable t = get_variable("t", {.shape = TensorShape{40, 3},
                                             .initializer = zeros_initializer(),
                                             .partitioner = fixed_size_partitioner(4)});
  sess.run(global_variables_initializer());
  const std::vector<Saver::Item> items = Saver().items();
  REQUIRE(items.size() == 4);
  // Part k on rank k; with `skip`, parts 1 and 3 on no rank (gaps in both pieces).
  auto tasks_for = [&](bool skip) {
    std::vector<ShareItem> all;
    for (size_t k = 0; k < items.size(); ++k) {
      if (skip && k % 2 == 1) continue;
      all.push_back({items[k], {static_cast<int>(k)}});
    }
    std::vector<std::unique_ptr<RestoreShare>> tasks;
    for (int r = 0; r < 4; ++r) {
      tasks.push_back(std::make_unique<RestoreShare>(all, r, path, default_file_system()));
    }
    return tasks;
  };
  const std::string data = path + ".data-00000-of-00001";

  SECTION("bitwise, every range verified") {
    auto tasks = tasks_for(false);
    CHECK(!restore(tasks));
    for (auto& task : tasks) task->assign();
    CHECK(t.eval(sess).to_vector<float>() == iota(120));
  }
  SECTION("gaps: the verifier checksums the rows no task restores") {
    auto tasks = tasks_for(true);
    CHECK(!restore(tasks));
    flip_byte(data, 12 * 12 + 1);  // row 12: part 1's, restored by nobody
    auto again = tasks_for(true);
    const auto failure = restore(again);
    REQUIRE(failure);
    CHECK(failure->ranks == std::vector<int>{0});
    CHECK_THAT(failure->message, Catch::Contains("crc32c mismatch"));
  }
  SECTION("a corrupt byte in another task's rows fails the piece on every task") {
    flip_byte(data, 12 * 12 + 1);  // row 12: rank 1's; piece 0's verifier is rank 0
    auto tasks = tasks_for(false);
    const auto failure = restore(tasks);
    REQUIRE(failure);
    CHECK(failure->ranks == std::vector<int>{0});
    CHECK_THAT(failure->message, Catch::Contains("crc32c mismatch") &&
                                     Catch::Contains("slice 0,20:0,3") && Catch::Contains(data));
    flip_byte(data, 12 * 12 + 1);
    flip_byte(data, 35 * 12);  // row 35: rank 3's; piece 1's verifier is rank 2
    auto second = tasks_for(false);
    const auto other = restore(second);
    REQUIRE(other);
    CHECK(other->ranks == std::vector<int>{2});
  }
  SECTION("tasks reading the same bytes must agree") {
    std::vector<ShareItem> all;
    for (const Saver::Item& item : items) all.push_back({item, {0, 1}});  // local to both
    RestoreShare a(all, 0, path, default_file_system()), b(all, 1, path, default_file_system());
    std::vector<std::vector<uint32_t>> by_rank{a.read(), b.read()};
    CHECK(!a.verify(by_rank));
    by_rank[1][0] ^= 1;
    const auto failure = a.verify(by_rank);
    REQUIRE(failure);
    CHECK(failure->ranks == std::vector<int>{0, 1});
    CHECK_THAT(failure->message, Catch::Contains("read different bytes"));
  }
}

TEST_CASE("RestoreShare: one task reads a large piece in chunks on several threads",
          "[distributed][restore]") {
  TempDir dir;
  const int64_t rows = 1200000, cols = 16;  // 76.8 MB: segments of 1-2 16 MiB chunks
  std::string path;
  {
    reset_default_graph();
    Session sess;
    PartitionedVariable t = get_variable(
        "big", {.initializer = Tensor::from_vector<float>(iota(rows * cols), {rows, cols}),
                .partitioner = fixed_size_partitioner(2)});
    sess.run(global_variables_initializer());
    path = *Saver().save(sess, dir / "ckpt").path();
  }
  reset_default_graph();
  Session sess;
  PartitionedVariable t = get_variable("big", {.shape = TensorShape{rows, cols},
                                               .initializer = zeros_initializer(),
                                               .partitioner = fixed_size_partitioner(3)});
  sess.run(global_variables_initializer());
  std::vector<ShareItem> all;
  for (const Saver::Item& item : Saver().items()) all.push_back({item, {0}});
  for (int threads : {1, 4}) {
    CAPTURE(threads);
    RestoreShare share(all, 0, path, default_file_system(), threads);
    const std::vector<uint32_t> crcs = share.read();
    CHECK(crcs.size() == 4);  // each stored piece in two ranges (the three parts' rows)
    CHECK(!share.verify({crcs}));
    share.assign();
    CHECK(t.eval(sess).to_vector<float>() == iota(rows * cols));
  }
}

}  // namespace
}  // namespace varstate
