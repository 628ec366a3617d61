// compact_checkpoint (varstate/checkpoint_chain.h): compacting a chain writes
// the very files a full save at the same step writes (tensors streamed in
// chunks, rows straddling a chunk's end, rows changed by several deltas,
// tensors a delta holds whole, strings, scalars), from a sharded base too;
// a base of the other endianness compacts into the values its chain reads,
// under a valid checksum; a corrupt base or delta, a missing delta or a
// failed write throws an error naming the file and leaves no output. Also
// the reads compaction streams with: BundleReader's range readers on a
// tensor stored whole.
#include <catch2/catch.hpp>

#include <filesystem>
#include <span>

#include "checkpoint/checkpoint_chain.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/fault_injection_file_system.h"
#include "checkpoint/table_internal.h"
#include "checkpoint/tensor_bundle.h"
#include "varstate/cast.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/scatter.h"
#include "varstate/variables.h"

namespace varstate {
namespace {

using testing::TempDir;

// 12-byte rows: 6 MB, more than five 1 MiB chunks of compaction; the first
// one's end (byte 1048576) falls inside row 87381.
constexpr int64_t kBigRows = 500'000;
constexpr int64_t kChunkEndRow = 87'381;
// A table whose deltas each change a quarter of its 4-byte rows: too many
// patched rows for compaction to derive its checksum from the base's.
constexpr int64_t kQuarterRows = 8192;

Tensor ramp(DType dtype, int64_t rows, int64_t width) {
  std::vector<float> v(static_cast<size_t>(rows * width));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 89);
  return cast_tensor(Tensor::from_vector<float>(v, {rows, width}), dtype);
}

void touch(Variable& var, const std::vector<int64_t>& ids, int step) {
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t width = var.shape().dim(1);
  std::vector<float> v(static_cast<size_t>(n * width), static_cast<float>(step + 100));
  scatter_update(var, Tensor::from_vector<int64_t>(ids, {n}),
                 cast_tensor(Tensor::from_vector<float>(v, {n, width}), var.dtype()));
}

std::vector<std::string> files_named(const std::string& dir, const std::string& start) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(start, 0) == 0) out.push_back(name);
  }
  return out;
}

// A base and three deltas of `vars` in `dir` ("m-0" .. "m-3"); the rows each
// delta changes overlap the previous delta's. Returns the head.
std::string save_chain(Session& sess, const TempDir& dir, std::vector<Variable>& vars,
                       Variable& dense, bool sharded) {
  Saver saver({.sharded = sharded, .max_to_keep = 0});
  std::string head = *saver
                          .save(sess, dir / "m",
                                {.global_step = 0, .write_meta_graph = false, .incremental = true})
                          .path();
  for (int step = 1; step <= 3; ++step) {
    for (Variable& v : vars) {
      const int64_t last = v.shape().dim(0) - 1;
      touch(v, {0, int64_t{step}, step + 1, last}, step);
      if (v.shape().dim(0) == kBigRows)
        touch(v, {kChunkEndRow - 1 + step % 2, kChunkEndRow + 1}, step);
      if (v.shape().dim(0) == kQuarterRows) {
        std::vector<int64_t> quarter;
        for (int64_t r = step; r < kQuarterRows; r += 4) quarter.push_back(r);
        touch(v, quarter, step);
      }
    }
    std::vector<int64_t> all(static_cast<size_t>(dense.shape().dim(0)));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    touch(dense, all, step);
    head = *saver
                .save(sess, dir / "m",
                      {.global_step = step, .write_meta_graph = false, .incremental = true})
                .path();
  }
  REQUIRE(checkpoint_chain(head).size() == 4);
  return head;
}

struct FreshGraph {
  FreshGraph() { reset_default_graph(); }
};

// A 500,000-row table ("big") and a dense one, saved as a base and three
// deltas in a fresh directory.
struct BigChain : FreshGraph {
  BigChain() {
    vars.emplace_back(ramp(DType::kFloat, kBigRows, 3), VariableOptions{.name = "big"});
    sess.run(global_variables_initializer());
    head = save_chain(sess, dir, vars, dense, false);
  }
  TempDir dir;
  Session sess;
  std::vector<Variable> vars;
  Variable dense{ramp(DType::kFloat, 4096, 4), {.name = "dense"}};
  std::string head;
};

}  // namespace

TEST_CASE("the range readers read a tensor stored whole as slice -1 (compaction's reads)",
          "[compact][bundle]") {
  TempDir dir;
  std::vector<int32_t> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data()), 4000);
  {
    BundleWriter writer(dir / "b");
    writer.add("whole", TensorView{DType::kInt32, {250, 4}, bytes, {}});
    writer.add_slice("parted", {250, 4}, TensorSlice({{0, 100}, {}}),
                     TensorView{DType::kInt32, {100, 4}, bytes.first(1600), {}});
    writer.finish();
  }
  BundleReader reader(dir / "b");
  const TensorInfo whole = reader.info("whole");
  std::string where;
  const uint32_t stored = reader.stored_slice_crc32c(whole, -1, &where);
  CHECK_THAT(where, Catch::Contains("\"whole\"") && Catch::Contains("b.data-00000-of-00001"));
  std::vector<int32_t> got(v.size(), -1);
  auto* dst = reinterpret_cast<std::byte*>(got.data());
  const uint32_t head = reader.read_slice_range_crc(whole, -1, 0, 1204, dst);
  const uint32_t tail = reader.read_slice_range_crc(whole, -1, 1204, 4000, dst + 1204);
  CHECK(crc32c::combine(head, tail, 4000 - 1204) == stored);
  CHECK(got == v);
  CHECK_THROWS_AS(reader.read_slice_range_crc(whole, -1, 0, 4004, dst), InvalidArgumentError);
  CHECK_THROWS_AS(reader.stored_slice_crc32c(reader.info("parted"), -1, &where),
                  InvalidArgumentError);
}

TEST_CASE("compaction writes the files a full save at the same step writes", "[compact]") {
  const bool sharded = GENERATE(false, true);
  CAPTURE(sharded);
  TempDir dir;
  reset_default_graph();
  Session sess;
  std::vector<Variable> vars;
  for (DType dtype : {DType::kFloat, DType::kDouble, DType::kHalf, DType::kInt8, DType::kComplex128,
                      DType::kBool}) {
    vars.emplace_back(ramp(dtype, 4096, 5),
                      VariableOptions{.name = "v_" + std::string(dtype_name(dtype))});
  }
  vars.emplace_back(ramp(DType::kFloat, kBigRows, 3), VariableOptions{.name = "big"});
  vars.emplace_back(ramp(DType::kFloat, kQuarterRows, 1), VariableOptions{.name = "quarter"});
  Variable dense(ramp(DType::kFloat, 4096, 4), {.name = "dense"});
  Variable words(Tensor::from_vector<std::string>({"a", "bc", ""}), {.name = "words"});
  Variable scalar(Tensor(2.5), {.name = "scalar"});
  sess.run(global_variables_initializer());
  const std::string head = save_chain(sess, dir, vars, dense, sharded);
  CHECK_FALSE(BundleReader(head).contains("v_float"));  // held by rows
  CHECK_FALSE(BundleReader(head).contains("quarter"));
  CHECK(BundleReader(head).contains("dense"));  // held whole

  Saver full({.max_to_keep = 0});
  const std::string same =
      *full.save(sess, dir / "full", {.global_step = 3, .write_meta_graph = false}).path();
  compact_checkpoint(head, dir / "compact");
  CHECK(testing::read_file(dir / "compact.data-00000-of-00001") ==
        testing::read_file(same + ".data-00000-of-00001"));
  CHECK(testing::read_file(dir / "compact.index") == testing::read_file(same + ".index"));
}

TEST_CASE("compaction of a base written on a host of the other endianness", "[compact]") {
  BigChain chain;
  const TempDir& dir = chain.dir;
  const std::string& head = chain.head;
  const TensorData unswapped = open_checkpoint(head)->read("big");
  // The base's header rewritten as if a big-endian host had written it: its
  // values are read byte-swapped, after their checksums (of the bytes as
  // stored) are checked, so the output's checksum is the writer's own.
  auto t = testing::decode_table(testing::read_file(dir / "m-0.index"));
  REQUIRE(testing::to_hex(t.entries[0].second) == "08011a020801");
  t.entries[0].second = testing::from_hex("080110011a020801");
  write_table_atomically(*default_file_system(), dir / "m-0.index", t.entries);
  REQUIRE(BundleReader(dir / "m-0").byte_swapped());
  // Each delta names its links by the checksums of their index files: the
  // deltas rewritten in order to match, the rest of them as they were.
  for (const char* name : {"m-1", "m-2", "m-3"}) {
    const std::string delta_prefix = dir / name;
    std::vector<std::pair<std::string, TensorData>> tensors;
    std::vector<ChainRecordLink> links;
    {
      BundleReader delta(delta_prefix);
      links = *read_chain_record(delta);
      for (const TensorInfo& info : delta.list()) {
        if (info.name != kChainKey) tensors.emplace_back(info.name, delta.read(info.name));
      }
    }
    for (ChainRecordLink& link : links) {
      link.index_crc32c = index_checksum(*default_file_system(), dir / link.name);
    }
    BundleWriter writer(delta_prefix);
    for (const auto& [key, tensor] : tensors) writer.add(key, tensor.view());
    const TensorData record = TensorData::from_values<std::string>(
        {static_cast<int64_t>(links.size()) + 1}, chain_record_strings(links));
    writer.add(kChainKey, record.view());
    writer.finish();
  }

  compact_checkpoint(head, dir / "compact");
  const TensorData want = open_checkpoint(head)->read("big");
  const TensorData got = BundleReader(dir / "compact").read("big");  // checks the crc32c
  CHECK(got.bytes == want.bytes);
  CHECK(want.bytes != unswapped.bytes);  // the base's values did come swapped
}

TEST_CASE("a failed compaction names the file and leaves no output", "[compact]") {
  BigChain chain;
  const TempDir& dir = chain.dir;
  const std::string& head = chain.head;
  namespace fs = std::filesystem;
  const std::string out = dir / "compact";

  SECTION("corrupt base bytes") {
    const TensorInfo big = BundleReader(dir / "m-0").info("big");
    std::string data = testing::read_file(dir / "m-0.data-00000-of-00001");
    data[static_cast<size_t>(big.offset + 5'000'000)] ^= 0x21;  // past the first chunk
    testing::write_file(dir / "m-0.data-00000-of-00001", data);
    try {
      compact_checkpoint(head, out);
      FAIL("compacted");
    } catch (const DataLossError& e) {
      CHECK_THAT(e.what(), Catch::Contains("m-0.data-00000-of-00001") &&
                               Catch::Contains("crc32c mismatch") && Catch::Contains("\"big\""));
    }
    CHECK(files_named(dir.path(), "compact").empty());
  }
  SECTION("corrupt delta rows") {
    const std::string delta = dir / "m-2";
    const TensorInfo rows = BundleReader(delta).info(delta_rows_key("big", std::nullopt));
    std::string data = testing::read_file(delta + ".data-00000-of-00001");
    data[static_cast<size_t>(rows.offset)] ^= 0x21;
    testing::write_file(delta + ".data-00000-of-00001", data);
    try {
      compact_checkpoint(head, out);
      FAIL("compacted");
    } catch (const DataLossError& e) {
      CHECK_THAT(e.what(),
                 Catch::Contains("m-2.data-00000-of-00001") && Catch::Contains("crc32c mismatch"));
    }
    CHECK(files_named(dir.path(), "compact").empty());
  }
  SECTION("a missing delta") {
    fs::rename(dir / "m-1.index", dir / "moved.index");
    try {
      compact_checkpoint(head, out);
      FAIL("compacted");
    } catch (const NotFoundError& e) {
      CHECK_THAT(e.what(), Catch::Contains("m-1") && Catch::Contains("missing"));
    }
    CHECK(files_named(dir.path(), "compact").empty());
  }
  SECTION("a failed write") {
    const FileOp op = GENERATE(FileOp::kAppend, FileOp::kSync, FileOp::kRename);
    CAPTURE(static_cast<int>(op));
    FaultInjectionFileSystem faulty(default_file_system());
    faulty.fail_nth(op, op == FileOp::kAppend ? 2 : 1);
    CHECK_THROWS_AS(compact_checkpoint(head, out, &faulty), UnavailableError);
    CHECK(files_named(dir.path(), "compact").empty());
    compact_checkpoint(head, out, &faulty);  // the next try succeeds
    CHECK(checkpoint_chain(out).size() == 1);
  }
}

}  // namespace varstate
