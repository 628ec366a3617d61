// Saver throughput against the disk, measured in the same run.
//
// Variables: VARSTATE_CKPT_BENCH_GIB GiB (default 1; 8 for the large run) of
// float32 in mixed sizes (4M, 1M, 256K, 64K, 16K, 4K and 1K elements,
// repeated), on one device or spread over N devices (ps tasks, i.e. N data
// shards written by N threads). Files go to VARSTATE_BENCH_DIR (default
// /tmp/varstate_ckpt_bench).
//
// Counters (see bench_util.h): GBps = checkpoint bytes / mean time;
// limit_GBps = the same bytes moved by plain read()/write() in the same
// iterations; ratio = GBps / limit_GBps. The limits compare like with like:
//   save:    each iteration also write()s the checkpoint's byte count, split
//            into as many files as the checkpoint has data shards, and
//            fsync()s each file;
//   restore: each iteration also read()s the checkpoint's own data files
//            (same bytes, same layout) into a reused, already-touched buffer.
// Before every restore and every raw read the page cache is dropped when the
// process may (root: /proc/sys/vm/drop_caches); counter cache_dropped says
// whether it could, and the label repeats it. BM_RawWrite / BM_RawRead are
// the one-file numbers on their own. Also: crc_share (CRC32C time over the
// same bytes / save time), async stall vs blocking save, peak RSS, and on a
// GPU host the save of GPU variables against min(pinned device-to-host,
// disk write).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "checkpoint/crc32c.h"
#include "runtime/variable_access.h"
#include "varstate/device_manager.h"
#include "varstate/graph.h"
#include "varstate/initializers.h"
#include "varstate/meta_graph.h"
#include "varstate/placement.h"
#include "varstate/replica_device_setter.h"
#include "varstate/saver.h"
#include "varstate/session.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate::bench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

size_t total_bytes() {
  const char* env = std::getenv("VARSTATE_CKPT_BENCH_GIB");
  const double gib = env && *env ? std::atof(env) : quick_run() ? 0.125 : 1.0;
  return static_cast<size_t>(gib * static_cast<double>(size_t{1} << 30));
}

const std::string& bench_dir() {
  static const std::string dir = [] {
    const char* env = std::getenv("VARSTATE_BENCH_DIR");
    std::string d = env && *env ? env : "/tmp/varstate_ckpt_bench";
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void remove_checkpoints() {
  for (const auto& e : std::filesystem::directory_iterator(bench_dir()))
    std::filesystem::remove_all(e.path());
}

// Drops the page cache (needs root); true on success.
bool drop_page_cache() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3\n";
  f.flush();
  return f.good();
}

double peak_rss_gib() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / (1 << 20);  // KiB -> GiB
}

// Element counts of the variables: the mixed sizes, repeated, then the rest.
std::vector<int64_t> mixed_sizes(size_t bytes) {
  static const int64_t kSizes[] = {4 << 20,  1 << 20, 256 << 10, 64 << 10,
                                   16 << 10, 4 << 10, 1 << 10};
  std::vector<int64_t> out;
  int64_t left = static_cast<int64_t>(bytes / 4);
  for (size_t i = 0; left > 0; ++i) {
    int64_t n = std::min(kSizes[i % 7], left);
    out.push_back(n);
    left -= n;
  }
  return out;
}

// The variables on `num_devices` ps tasks (CPU) or on GPU:0.
struct Model {
  Graph graph;
  std::vector<Variable> vars;
  size_t bytes = 0;
  Model(int num_devices, bool on_gpu) {
    auto guard = graph.as_default();
    std::unique_ptr<DeviceScope> scope =
        on_gpu ? std::make_unique<DeviceScope>("/device:GPU:0")
               : std::make_unique<DeviceScope>(
                     replica_device_setter(num_devices > 1 ? num_devices : 0, "/job:ps", ""));
    uint32_t x = 12345;
    for (int64_t n : mixed_sizes(total_bytes())) {
      Tensor host(DType::kFloat, TensorShape{n});
      float* p = host.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        p[i] = static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
      }
      Variable v(Tensor::zeros(DType::kFloat, TensorShape{n}),
                 {.name = "v" + std::to_string(vars.size())});
      internal::set_value(v, on_gpu ? host.to(v.device()) : host);
      vars.push_back(v);
      bytes += static_cast<size_t>(n) * 4;
    }
  }
};

// A reused buffer of `bytes` bytes, every page touched once.
std::vector<char>& raw_buffer(size_t bytes) {
  static std::vector<char> buf;
  if (buf.size() < bytes) {
    buf.assign(bytes, 0);
    for (size_t i = 0; i < bytes; i += 4096) buf[i] = static_cast<char>(i >> 12);
  }
  return buf;
}

// Raw write()+fsync of `bytes` bytes split evenly over `num_files` files in
// the bench directory, one after another.
double raw_write_seconds(size_t bytes, int num_files = 1) {
  const std::vector<char>& buf = raw_buffer(bytes);
  auto t0 = Clock::now();
  size_t written = 0;
  for (int f = 0; f < num_files; ++f) {
    const size_t end = bytes * static_cast<size_t>(f + 1) / static_cast<size_t>(num_files);
    const std::string path = bench_dir() + "/raw-" + std::to_string(f);
    int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    while (written < end) {
      ssize_t n =
          ::write(fd, buf.data() + written, std::min<size_t>(end - written, size_t{64} << 20));
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
  }
  return since(t0);
}

void remove_raw_files() {
  for (const auto& e : std::filesystem::directory_iterator(bench_dir())) {
    if (e.path().filename().string().rfind("raw-", 0) == 0) std::filesystem::remove(e.path());
  }
}

// Raw read() of `paths`, one after another, into a reused buffer (the page
// cache dropped first when possible); returns the seconds and adds the bytes
// read to *bytes.
double raw_read_seconds(const std::vector<std::string>& paths, size_t* bytes, bool* dropped) {
  size_t total = 0;
  for (const std::string& p : paths) total += std::filesystem::file_size(p);
  std::vector<char>& buf = raw_buffer(total);
  *dropped = drop_page_cache();
  auto t0 = Clock::now();
  size_t off = 0;
  for (const std::string& p : paths) {
    int fd = ::open(p.c_str(), O_RDONLY);
    for (;;) {
      ssize_t n = ::read(fd, buf.data() + off, std::min<size_t>(total - off, size_t{64} << 20));
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  *bytes = off;
  return since(t0);
}

// The data files of the checkpoint at `prefix`, in shard order.
std::vector<std::string> data_files(const std::string& prefix) {
  std::vector<std::string> out;
  const std::string stem = std::filesystem::path(prefix).filename().string() + ".data-";
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(prefix).parent_path())) {
    if (e.path().filename().string().rfind(stem, 0) == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

double crc_seconds(size_t bytes) {
  static double seconds = 0;
  if (seconds == 0) {
    std::vector<char> buf(bytes, 7);
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      benchmark::DoNotOptimize(crc32c::value(buf.data(), buf.size()));
      best = std::min(best, since(t0));
    }
    seconds = best;
  }
  return seconds;
}

void set_counters(benchmark::State& state, double bytes, double seconds, double limit) {
  state.counters["GBps"] = bytes / seconds / 1e9;
  state.counters["limit_GBps"] = limit;
  state.counters["ratio"] = bytes / seconds / 1e9 / limit;
  state.counters["GiB"] = bytes / static_cast<double>(size_t{1} << 30);
  state.counters["peak_rss_GiB"] = peak_rss_gib();
}

void BM_RawWrite(benchmark::State& state) {
  const size_t bytes = total_bytes();
  double total = 0;
  for (auto _ : state) {
    double s = raw_write_seconds(bytes);
    state.SetIterationTime(s);
    total += s;
  }
  remove_raw_files();
  state.counters["GBps"] =
      static_cast<double>(bytes) * static_cast<double>(state.iterations()) / total / 1e9;
}

void BM_RawRead(benchmark::State& state) {
  const size_t bytes = total_bytes();
  raw_write_seconds(bytes);
  const std::vector<std::string> files = {bench_dir() + "/raw-0"};
  double total = 0;
  bool dropped = false;
  for (auto _ : state) {
    size_t got = 0;
    double s = raw_read_seconds(files, &got, &dropped);
    state.SetIterationTime(s);
    total += s;
  }
  remove_raw_files();
  state.counters["GBps"] =
      static_cast<double>(bytes) * static_cast<double>(state.iterations()) / total / 1e9;
  state.counters["cache_dropped"] = dropped ? 1 : 0;
}

void BM_Save(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  Model model(devices, false);
  Saver saver({.sharded = devices > 1, .graph = &model.graph});
  Session sess;
  const std::string prefix = bench_dir() + "/ckpt";
  double total = 0, raw_total = 0;
  int shards = 1;
  for (auto _ : state) {
    remove_checkpoints();
    ::sync();
    auto t0 = Clock::now();
    saver.save(sess, prefix, {.write_meta_graph = false});
    double s = since(t0);
    state.SetIterationTime(s);
    total += s;
    shards = static_cast<int>(data_files(prefix).size());
    remove_checkpoints();
    ::sync();
    raw_total += raw_write_seconds(model.bytes, shards);
  }
  const double n = static_cast<double>(state.iterations());
  const double per = total / n;
  set_counters(state, static_cast<double>(model.bytes), per,
               static_cast<double>(model.bytes) / (raw_total / n) / 1e9);
  state.counters["crc_share"] = crc_seconds(model.bytes) / per;
  state.counters["shards"] = shards;
  state.SetLabel("limit: write()+fsync of the same bytes into " + std::to_string(shards) +
                 " file(s)");
  remove_checkpoints();
}

void BM_Restore(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  Model model(devices, false);
  Saver saver(
      {.sharded = devices > 1, .restore_sequentially = state.range(1) != 0, .graph = &model.graph});
  Session sess;
  const std::string prefix = bench_dir() + "/ckpt";
  remove_checkpoints();
  saver.save(sess, prefix, {.write_meta_graph = false});
  const std::vector<std::string> files = data_files(prefix);
  double total = 0, raw_total = 0;
  bool dropped = true;
  for (auto _ : state) {
    size_t raw_bytes = 0;
    bool raw_dropped = false;
    raw_total += raw_read_seconds(files, &raw_bytes, &raw_dropped);
    if (raw_bytes != model.bytes) state.SkipWithError("raw read got a different byte count");
    const bool restore_dropped = drop_page_cache();
    dropped = dropped && raw_dropped && restore_dropped;
    auto t0 = Clock::now();
    saver.restore(sess, prefix);
    double s = since(t0);
    state.SetIterationTime(s);
    total += s;
  }
  const double n = static_cast<double>(state.iterations());
  set_counters(state, static_cast<double>(model.bytes), total / n,
               static_cast<double>(model.bytes) / (raw_total / n) / 1e9);
  state.counters["cache_dropped"] = dropped ? 1 : 0;
  state.counters["shards"] = static_cast<double>(files.size());
  state.SetLabel(std::string("limit: read() of the same ") + std::to_string(files.size()) +
                 " data file(s); page cache " + (dropped ? "dropped" : "NOT dropped (not root)") +
                 " before each");
  remove_checkpoints();
}

// The training-step stall: how long save() blocks, async vs blocking.
void BM_AsyncSaveStall(benchmark::State& state) {
  Model model(1, false);
  Saver saver({.graph = &model.graph});
  Session sess;
  double stall = 0, blocking = 0, async_total = 0;
  for (auto _ : state) {
    remove_checkpoints();
    ::sync();
    auto t0 = Clock::now();
    saver.save(sess, bench_dir() + "/blocking", {.write_meta_graph = false});
    blocking += since(t0);
    remove_checkpoints();
    ::sync();
    t0 = Clock::now();
    SaveHandle h =
        saver.save(sess, bench_dir() + "/async", {.write_meta_graph = false, .async = true});
    const double s = since(t0);
    stall += s;
    h.wait();
    async_total += since(t0);
    state.SetIterationTime(s);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["stall_ms"] = 1e3 * stall / n;
  state.counters["blocking_ms"] = 1e3 * blocking / n;
  state.counters["async_total_ms"] = 1e3 * async_total / n;
  state.counters["stall_vs_blocking"] = stall / blocking;
  state.counters["peak_rss_GiB"] = peak_rss_gib();
  remove_checkpoints();
}

// The comparison with TensorFlow's Saver (bench/compare_tf_checkpoint.py
// runs the same model in TensorFlow): `mib` MiB of float32 variables in the
// mixed sizes, each made by get_variable with a seeded
// random_uniform_initializer, saved as TensorFlow's Saver().save() does it,
// meta graph included. Counters: meta_bytes (the .meta file), data_bytes
// (index + data shards).
struct InitializedModel {
  Graph graph;
  size_t bytes = 0;
  int64_t count = 0;
  explicit InitializedModel(size_t total) {
    auto guard = graph.as_default();
    for (int64_t n : mixed_sizes(total)) {
      get_variable("v" + std::to_string(count),
                   {.shape = TensorShape{n},
                    .initializer = random_uniform_initializer({.seed = count + 1})});
      bytes += static_cast<size_t>(n) * 4;
      ++count;
    }
    Session sess;
    sess.run(global_variables_initializer());
  }
};

size_t checkpoint_bytes(const std::string& prefix) {
  size_t total = std::filesystem::file_size(prefix + ".index");
  for (const std::string& f : data_files(prefix)) total += std::filesystem::file_size(f);
  return total;
}

// Times state's iterations of saver.save(sess, prefix), each into an empty
// directory after a sync; returns the mean seconds of a save.
double time_saves(benchmark::State& state, Saver& saver, Session& sess, const std::string& prefix) {
  double total = 0;
  for (auto _ : state) {
    remove_checkpoints();
    ::sync();
    auto t0 = Clock::now();
    saver.save(sess, prefix);
    double s = since(t0);
    state.SetIterationTime(s);
    total += s;
  }
  return total / static_cast<double>(state.iterations());
}

// Save, with (sync:1, the default) and without (sync:0) the fsyncs.
void BM_SaveInitializers(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  const bool sync = state.range(1) != 0;
  InitializedModel model(bytes);
  Saver saver({.graph = &model.graph, .sync = sync});
  Session sess;
  const std::string prefix = bench_dir() + "/initialized";
  const double mean_s = time_saves(state, saver, sess, prefix);
  state.counters["GBps"] = static_cast<double>(model.bytes) / mean_s / 1e9;
  state.counters["meta_bytes"] = static_cast<double>(std::filesystem::file_size(prefix + ".meta"));
  state.counters["data_bytes"] = static_cast<double>(checkpoint_bytes(prefix));
  state.counters["variables"] = static_cast<double>(model.count);
  state.counters["peak_rss_GiB"] = peak_rss_gib();
  remove_checkpoints();
}

// Restore of that checkpoint (page cache dropped first when root can).
void BM_RestoreInitializers(benchmark::State& state) {
  InitializedModel model(static_cast<size_t>(state.range(0)) << 20);
  Saver saver({.graph = &model.graph});
  Session sess;
  const std::string prefix = bench_dir() + "/initialized";
  remove_checkpoints();
  saver.save(sess, prefix);
  double total = 0;
  bool dropped = true;
  for (auto _ : state) {
    dropped = drop_page_cache() && dropped;
    auto t0 = Clock::now();
    saver.restore(sess, prefix);
    double s = since(t0);
    state.SetIterationTime(s);
    total += s;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["GBps"] = static_cast<double>(model.bytes) / (total / n) / 1e9;
  state.counters["cache_dropped"] = dropped ? 1 : 0;
  remove_checkpoints();
}

// `count` variables of 256 floats, "v0", "v1", ..., each with a seeded
// random_uniform initializer, in the default graph.
void add_small_variables(int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    get_variable(
        "v" + std::to_string(i),
        {.shape = TensorShape{256}, .initializer = random_uniform_initializer({.seed = i + 1})});
  }
}

// A model of many small variables (range(0) of 256 floats each, seeded
// random_uniform initializers): Saver::save with its defaults, the meta
// graph included, where the per-variable work (graph ops, meta graph
// nodes, index entries) outweighs the bytes.
void BM_SaveManyVariables(benchmark::State& state) {
  const int64_t count = state.range(0);
  Graph graph;
  {
    auto guard = graph.as_default();
    add_small_variables(count);
    Session sess;
    sess.run(global_variables_initializer());
  }
  auto built = Clock::now();
  Saver saver({.graph = &graph});
  state.counters["saver_build_ms"] = since(built) * 1e3;
  Session sess;
  const std::string prefix = bench_dir() + "/many";
  const double mean_s = time_saves(state, saver, sess, prefix);
  state.counters["us_per_variable"] = mean_s / static_cast<double>(count) * 1e6;
  state.counters["meta_bytes"] = static_cast<double>(std::filesystem::file_size(prefix + ".meta"));
  remove_checkpoints();
}

// import_meta_graph of that model's meta graph (range(0) variables) into a
// fresh graph: the variables, their initializers and the saver recreated.
void BM_ImportManyVariables(benchmark::State& state) {
  const int64_t count = state.range(0);
  const std::string meta = bench_dir() + "/many_import.meta";
  {
    Graph graph;
    auto guard = graph.as_default();
    add_small_variables(count);
    Saver({.graph = &graph}).export_meta_graph(meta);
  }
  for (auto _ : state) {
    Graph fresh;
    auto guard = fresh.as_default();
    auto t0 = Clock::now();
    import_meta_graph(meta);
    state.SetIterationTime(since(t0));
  }
  std::filesystem::remove(meta);
}

// GPU variables: end-to-end save against min(pinned D2H, disk write).
void BM_GpuSave(benchmark::State& state) {
  Device* gpu = gpu_or_skip(state);
  if (gpu == nullptr) return;
  const bool async = state.range(0) != 0;
  Model model(1, true);
  const double d2h = limit_gbps(Limit::kDeviceToHost, size_t{1} << 30, gpu);
  double raw_best = 1e30;
  for (int i = 0; i < 3; ++i) raw_best = std::min(raw_best, raw_write_seconds(model.bytes));
  remove_raw_files();
  const double limit = std::min(d2h, static_cast<double>(model.bytes) / raw_best / 1e9);
  Saver saver({.graph = &model.graph});
  Session sess;
  double total = 0, stall = 0;
  for (auto _ : state) {
    remove_checkpoints();
    ::sync();
    auto t0 = Clock::now();
    SaveHandle h =
        saver.save(sess, bench_dir() + "/gpu", {.write_meta_graph = false, .async = async});
    stall += since(t0);
    h.wait();
    double s = since(t0);
    state.SetIterationTime(s);
    total += s;
  }
  const double n = static_cast<double>(state.iterations());
  set_counters(state, static_cast<double>(model.bytes), total / n, limit);
  state.counters["d2h_GBps"] = d2h;
  state.counters["stall_ms"] = 1e3 * stall / n;
  remove_checkpoints();
}

BENCHMARK(BM_RawWrite)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RawRead)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Save)->ArgName("devices")->Arg(1)->Arg(4)->UseManualTime()->Iterations(3)->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_Restore)
    ->ArgNames({"devices", "sequential"})
    ->Args({1, 0})
    ->Args({4, 0})
    ->Args({1, 1})
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AsyncSaveStall)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SaveInitializers)
    ->ArgNames({"mib", "sync"})
    ->ArgsProduct({sizes_mib({256, 1024}, {16}), {1, 0}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RestoreInitializers)
    ->ArgName("mib")
    ->ArgsProduct({sizes_mib({256, 1024}, {16})})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SaveManyVariables)
    ->ArgName("count")
    ->Arg(4096)
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImportManyVariables)
    ->ArgName("count")
    ->Arg(4096)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuSave)
    ->ArgName("async")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace varstate::bench
