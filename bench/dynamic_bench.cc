// Dynamic (hash-keyed) variables against the dense variable they replace,
// on the CPU, interleaved in one run, medians of the rounds:
//   lookup / gather / scatter_add of 65,536 keys (uniform and Zipf(1.1)
//     over the live keys) in a table of 1M live keys, dim 64, float32,
//     against the same call on a dense [1M, 64] variable with ids remapped
//     ahead (the limit: no key lookup at all), and against a
//     std::unordered_map remap followed by that dense call (what a user
//     without dynamic tables writes);
//   sparse Adagrad on 65,536 keys, against the dense step with remapped ids;
//   insertion of 1M new keys (zero rows) into a table reserved ahead and
//     into one that grows, keys per second, against the limit: the rows'
//     bytes copied into a fresh buffer of the arena's size;
//   memory per live row against key + row bytes, slots included;
//   an incremental save after 1 % of the keys changed (Adagrad on them:
//     rows and slot rows) against a full save of the table, time and bytes,
//     on the temp directory's disk.
// With --device NAME (default /device:CPU:0) the tables, the dense
// variable, the keys, ids and updates all live on that device, every timed
// call ends with a device synchronize, and the insertion limit is the rows
// copied device to device. On a GPU the dense gather of remapped ids is the
// device's random-access limit for these 256-byte rows.
// With --first-growth it only grows the process's first table from empty
// to 1M keys (65,536 a call), once, and reports the time and the growth of
// the process's peak resident memory: what a program pays the first time
// its table grows (memory not yet faulted in, no cached blocks). One
// sample a process: run it several times.
// With --only CALL it measures that call alone: lookup, gather_training,
// scatter_add, sparse_adagrad (both distributions) or insert (the
// insertion of 1M keys and its limit).
//   bench_dynamic [--only CALL] [--reps N] [--out F.json] [--machine NAME] [--device NAME]
//   bench_dynamic --first-growth [--out F.json] [--machine NAME]
#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "timing.h"
#include "varstate/varstate.h"

using namespace varstate;
using varstate::bench::median;
using varstate::bench::seconds_of_call;

namespace {

constexpr int64_t kKeys = 1 << 20;
constexpr int64_t kBatch = 65536;
constexpr int64_t kDim = 64;

std::vector<int64_t> random_keys(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> keys(static_cast<size_t>(n));
  for (int64_t& k : keys) k = static_cast<int64_t>(gen());
  return keys;
}

struct Row {
  std::string name;
  std::vector<std::pair<std::string, double>> fields;
};

// Wall seconds of `fn` and the device work it queued.
double seconds_on(Device& device, const std::function<void()>& fn) {
  return seconds_of_call([&] {
    fn();
    device.synchronize();
  });
}

// Medians of `reps` interleaved rounds of each side on `device`; returns
// seconds.
std::vector<double> interleaved(Device& device, int reps,
                                const std::vector<std::function<void()>>& sides) {
  std::vector<std::vector<double>> t(sides.size());
  // Warm-up: the first touches, and the calls in which a CPU scatter
  // learns whether a split pays here (kernels::cpu::SplitTrials): the
  // steady state of a program calling the op again and again.
  for (int warm = 0; warm < 1 + 2 * kernels::cpu::SplitTrials::kSamples; ++warm) {
    for (const auto& s : sides) seconds_on(device, s);
  }
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < sides.size(); ++i) t[i].push_back(seconds_on(device, sides[i]));
  }
  std::vector<double> out;
  for (auto& v : t) out.push_back(median(v));
  return out;
}

// Peak resident memory of the process so far, bytes.
double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

// --first-growth (above).
int first_growth(const std::string& out, const std::string& machine) {
  Session session;
  const std::vector<int64_t> fresh = random_keys(kKeys, 7);
  std::vector<Tensor> batches;
  for (int64_t b = 0; b < kKeys; b += kBatch) {
    batches.push_back(
        Tensor::from_vector(std::vector<int64_t>(fresh.begin() + b, fresh.begin() + b + kBatch)));
  }
  const Tensor zero_rows = Tensor::zeros(DType::kFloat, {kBatch, kDim});
  DynamicVariable t =
      get_dynamic_variable("fresh", {.dim = kDim, .initializer = zeros_initializer()});
  session.run(global_variables_initializer());
  const double rss_before = peak_rss_bytes();
  const double s = seconds_of_call([&] {
    for (const Tensor& batch : batches) t.insert(batch, zero_rows);
  });
  const double rss_growth = peak_rss_bytes() - rss_before;
  const double row_bytes = static_cast<double>(kKeys * (kDim * 4 + 8));
  std::printf("%-28s %8.1f ms  %.1f M keys/s  peak RSS +%.0f MB (%.2fx the keys and rows)\n",
              "insert_1M_growing_first", s * 1e3, static_cast<double>(kKeys) / s / 1e6,
              rss_growth / 1e6, rss_growth / row_bytes);
  if (!out.empty()) {
    std::ofstream f(out);
    f << "{\"context\": {\"machine\": \"" << machine << "\", \"live_keys\": " << kKeys
      << ", \"batch\": " << kBatch << ", \"dim\": " << kDim
      << "}, \"results\": [{\"case\": \"insert_1M_growing_first\", \"ms\": " << s * 1e3
      << ", \"M_keys_per_s\": " << static_cast<double>(kKeys) / s / 1e6
      << ", \"peak_rss_growth_MB\": " << rss_growth / 1e6 << ", \"size\": " << t.size() << "}]}\n";
  }
  return t.size() == kKeys ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // --first-growth and --only are taken out before the common flags are
  // parsed.
  bool growth_only = false;
  std::string only;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--first-growth") == 0) {
      growth_only = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  const varstate::bench::PlainArgs args = varstate::bench::parse_plain_args(
      static_cast<int>(rest.size()), rest.data(), "bench_dynamic", 9, /*takes_device=*/true);
  if (growth_only) return first_growth(args.out, args.machine);
  const int reps = args.reps;
  const std::string& out = args.out;
  const std::string& machine = args.machine;
  const std::string device_name = args.device.empty() ? "/device:CPU:0" : args.device;
  Device* found = DeviceManager::instance().find(DeviceSpec::parse(device_name));
  if (found == nullptr) {
    std::fprintf(stderr, "bench_dynamic: no device %s here\n", device_name.c_str());
    return 2;
  }
  if (found->emulated()) {
    std::fprintf(stderr, "bench_dynamic: %s is emulated: its timings would be the CPU's\n",
                 device_name.c_str());
    return 2;
  }
  constexpr std::string_view kOps[] = {"lookup", "gather_training", "scatter_add", "sparse_adagrad",
                                       "insert"};
  if (!only.empty() && std::find(std::begin(kOps), std::end(kOps), only) == std::end(kOps)) {
    std::fprintf(stderr,
                 "bench_dynamic: no call %s (--only takes lookup, gather_training, scatter_add, "
                 "sparse_adagrad or insert)\n",
                 only.c_str());
    return 2;
  }
  Device& device = *found;
  DeviceScope here(device_name);
  Session session;
  const std::vector<int64_t> keys = random_keys(kKeys, 1);
  DynamicVariable table = get_dynamic_variable(
      "table", {.dim = kDim, .initializer = zeros_initializer(), .initial_capacity = kKeys});
  Variable dense = get_variable(
      "dense", {.shape = TensorShape{kKeys, kDim}, .initializer = zeros_initializer()});
  AdagradOptimizer opt_table(0.01);
  AdagradOptimizer opt_dense(0.01);
  session.run(global_variables_initializer());
  // The live keys, and the remap a user would keep.
  for (int64_t b = 0; b < kKeys; b += kBatch) {
    const std::vector<int64_t> part(keys.begin() + b, keys.begin() + b + kBatch);
    table.gather(Tensor::from_vector(part));
  }
  std::unordered_map<int64_t, int64_t> remap;
  remap.reserve(static_cast<size_t>(kKeys));
  for (int64_t i = 0; i < kKeys; ++i) remap.emplace(keys[static_cast<size_t>(i)], i);
  const Tensor updates = Tensor::filled(DType::kFloat, {kBatch, kDim}, Tensor(0.001f), device);
  std::vector<Row> rows;
  double sink = 0;
  // Writes --out and gives the exit status.
  auto finish = [&] {
    if (!out.empty()) {
      std::ofstream f(out);
      f << "{\n  \"context\": {\"machine\": \"" << machine << "\", \"device\": \"" << device_name
        << "\", \"threads\": " << std::thread::hardware_concurrency()
        << ", \"live_keys\": " << kKeys << ", \"batch\": " << kBatch << ", \"dim\": " << kDim
        << ", \"reps\": " << reps << "},\n  \"results\": [\n";
      for (size_t i = 0; i < rows.size(); ++i) {
        f << "    {\"case\": \"" << rows[i].name << "\"";
        for (const auto& [key, value] : rows[i].fields) f << ", \"" << key << "\": " << value;
        f << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
      }
      f << "  ]\n}\n";
    }
    return sink == 0 ? 1 : 0;
  };

  for (const bool zipf : {false, true}) {
    const std::vector<int64_t> pos =
        varstate::bench::random_positions(kKeys, kBatch, zipf, zipf ? 3 : 2);
    std::vector<int64_t> batch_keys(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) batch_keys[i] = keys[static_cast<size_t>(pos[i])];
    const Tensor k = Tensor::from_vector(batch_keys).to(device);
    const Tensor ids = Tensor::from_vector(pos).to(device);
    // The user's remap runs on the host, on keys the host holds.
    auto remapped = [&] {
      std::vector<int64_t> out(batch_keys.size());
      for (size_t i = 0; i < out.size(); ++i) out[i] = remap.find(batch_keys[i])->second;
      return Tensor::from_vector(out).to(device);
    };
    const char* dist = zipf ? "zipf" : "uniform";
    struct Op {
      const char* name;
      std::function<void()> dynamic, dense_ids, map_then_dense;
    };
    std::vector<Op> ops = {
        {"lookup", [&] { sink += table.lookup(k).num_elements(); },
         [&] { sink += gather(dense, ids).num_elements(); },
         [&] { sink += gather(dense, remapped()).num_elements(); }},
        {"gather_training", [&] { sink += table.gather(k).num_elements(); },
         [&] { sink += gather(dense, ids).num_elements(); },
         [&] { sink += gather(dense, remapped()).num_elements(); }},
        {"scatter_add", [&] { table.scatter_add(k, updates); },
         [&] { scatter_add(dense, ids, updates); },
         [&] { scatter_add(dense, remapped(), updates); }},
        {"sparse_adagrad", [&] { opt_table.apply_gradients({table.gradient(k, updates)}); },
         [&] {
           opt_dense.apply_gradients({{IndexedSlices(updates, ids), dense}});
         },
         [&] {
           opt_dense.apply_gradients({{IndexedSlices(updates, remapped()), dense}});
         }},
    };
    for (const Op& op : ops) {
      if (!only.empty() && only != op.name) continue;
      const std::vector<double> t =
          interleaved(device, reps, {op.dynamic, op.dense_ids, op.map_then_dense});
      const std::string name = std::string(op.name) + "_65536_" + dist;
      std::printf(
          "%-28s dynamic %8.3f ms  dense(remapped ids) %8.3f ms (%.2fx)  "
          "unordered_map+dense %8.3f ms (%.2fx)\n",
          name.c_str(), t[0] * 1e3, t[1] * 1e3, t[1] / t[0], t[2] * 1e3, t[2] / t[0]);
      std::fflush(stdout);
      rows.push_back({name,
                      {{"dynamic_ms", t[0] * 1e3},
                       {"dense_remapped_ms", t[1] * 1e3},
                       {"map_then_dense_ms", t[2] * 1e3},
                       {"dynamic_over_dense", t[1] / t[0]},
                       {"dynamic_over_map_then_dense", t[2] / t[0]}}});
    }
  }

  if (!only.empty() && only != "insert") return finish();

  // Memory per live row: the table with its two members (the variable and
  // Adagrad's accumulator), against (key + row) bytes of each.
  if (only.empty()) {
    const double live = static_cast<double>(table.size());
    const double payload = live * 2 * (8.0 + kDim * 4.0);
    const double held = static_cast<double>(table.memory_bytes());
    std::printf("%-28s %.1f bytes per live row (key + rows: %.1f), %.3fx\n", "memory_per_row",
                held / live, payload / live, held / payload);
    rows.push_back({"memory_per_row_with_adagrad_slot",
                    {{"bytes_per_row", held / live},
                     {"key_plus_rows_bytes", payload / live},
                     {"ratio", held / payload}}});
  }

  // An incremental save after 1 % of the keys changed, against a full save.
  if (only.empty()) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() /
                         ("bench_dynamic_" + std::to_string(static_cast<long>(::getpid())));
    fs::create_directories(dir);
    auto bytes_of = [&](const std::string& prefix) {
      uint64_t n = 0;
      const std::string base = fs::path(prefix).filename().string() + ".";
      for (const auto& f : fs::directory_iterator(dir)) {
        if (f.path().filename().string().starts_with(base)) n += f.file_size();
      }
      return static_cast<double>(n);
    };
    // The table and its accumulator only.
    const std::vector<Variable> saved = {table.variable(),
                                         *opt_table.get_slot(table.variable(), "accumulator")};
    Saver incremental({.var_list = saved, .max_to_keep = 0, .max_deltas_per_base = 1000});
    Saver full({.var_list = saved});
    (void)incremental
        .save(session, (dir / "inc").string(), {.global_step = int64_t{0}, .incremental = true})
        .wait();
    const int64_t changed = kKeys / 100;
    const Tensor grads = Tensor::filled(DType::kFloat, {changed, kDim}, Tensor(0.001f), device);
    std::vector<double> t_delta, t_full, b_delta, b_full;
    for (int r = 0; r < reps; ++r) {
      // 1 % of the keys, distinct, a different stretch each round.
      const int64_t from = (static_cast<int64_t>(r) * 7919 * changed) % (kKeys - changed);
      const std::vector<int64_t> part(keys.begin() + from, keys.begin() + from + changed);
      opt_table.apply_gradients({table.gradient(Tensor::from_vector(part).to(device), grads)});
      device.synchronize();
      std::string delta_path;
      t_delta.push_back(seconds_of_call([&] {
        delta_path = incremental
                         .save(session, (dir / "inc").string(),
                               {.global_step = int64_t{r + 1}, .incremental = true})
                         .wait()
                         .value();
      }));
      std::string full_path;
      t_full.push_back(seconds_of_call(
          [&] { full_path = full.save(session, (dir / "full").string()).wait().value(); }));
      b_delta.push_back(bytes_of(delta_path));
      b_full.push_back(bytes_of(full_path));
      if (!checkpoint_chain(delta_path).back().is_delta) {
        std::fprintf(stderr, "bench_dynamic: %s is not a delta\n", delta_path.c_str());
        return 1;
      }
    }
    fs::remove_all(dir);
    const double td = median(t_delta), tf = median(t_full);
    const double bd = median(b_delta), bf = median(b_full);
    std::printf(
        "%-28s delta %8.1f ms %8.2f MB  full %8.1f ms %8.2f MB  (%.1fx faster, %.1fx smaller)\n",
        "save_after_1pct_changed", td * 1e3, bd / 1e6, tf * 1e3, bf / 1e6, tf / td, bf / bd);
    rows.push_back({"incremental_save_1pct_changed_with_adagrad_slot",
                    {{"delta_ms", td * 1e3},
                     {"full_ms", tf * 1e3},
                     {"delta_MB", bd / 1e6},
                     {"full_MB", bf / 1e6},
                     {"faster", tf / td},
                     {"smaller", bf / bd}}});
  }

  // Insertion of 1M new keys, in batches of 65,536.
  const std::vector<int64_t> fresh = random_keys(kKeys, 7);
  std::vector<Tensor> fresh_batches;
  for (int64_t b = 0; b < kKeys; b += kBatch) {
    fresh_batches.push_back(
        Tensor::from_vector(std::vector<int64_t>(fresh.begin() + b, fresh.begin() + b + kBatch))
            .to(device));
  }
  const Tensor zero_rows = Tensor::zeros(DType::kFloat, {kBatch, kDim}, device);
  // The limit: the rows' bytes copied into a fresh buffer of the arena's
  // size and allocator, in the same batches, over every core (the pages
  // faulted in as the arena's are).
  const double limit_s = [&] {
    std::vector<double> t;
    if (!device.is_cpu()) {  // on a GPU: each batch's rows copied into a fresh buffer there
      for (int r = 0; r < std::max(3, reps / 3); ++r) {
        std::vector<Tensor> arena;
        t.push_back(seconds_on(device, [&] {
          for (int64_t b = 0; b < kKeys / kBatch; ++b) arena.push_back(zero_rows.clone());
        }));
      }
      return median(t);
    }
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    for (int r = 0; r < std::max(3, reps / 3); ++r) {
      Tensor arena(DType::kFloat, {kKeys, kDim}, DeviceManager::instance().cpu());
      t.push_back(seconds_of_call([&] {
        const size_t batch_bytes = zero_rows.nbytes();
        for (int64_t b = 0; b < kKeys / kBatch; ++b) {
          auto* dst =
              static_cast<std::byte*>(arena.raw_data()) + static_cast<size_t>(b) * batch_bytes;
          const auto* src = static_cast<const std::byte*>(zero_rows.raw_data());
          const size_t part = batch_bytes / threads;
          std::vector<std::thread> copies;
          for (unsigned i = 0; i < threads; ++i) {
            copies.emplace_back([=] { std::memcpy(dst + i * part, src + i * part, part); });
          }
          for (std::thread& c : copies) c.join();
        }
      }));
      sink += static_cast<double>(static_cast<const float*>(arena.raw_data())[kKeys * kDim - 1]);
    }
    return median(t);
  }();
  std::printf("%-28s %8.1f ms  %.1f M rows/s (the rows copied: the limit)\n", "insert_1M_limit",
              limit_s * 1e3, static_cast<double>(kKeys) / limit_s / 1e6);
  rows.push_back(
      {"insert_1M_limit_rows_copied",
       {{"ms", limit_s * 1e3}, {"M_rows_per_s", static_cast<double>(kKeys) / limit_s / 1e6}}});
  for (const bool reserved : {true, false}) {
    std::vector<double> t;
    for (int r = 0; r < std::max(3, reps / 3); ++r) {
      reset_default_graph();
      DynamicVariable t2 =
          get_dynamic_variable("fresh", {.dim = kDim,
                                         .initializer = zeros_initializer(),
                                         .initial_capacity = reserved ? kKeys : 0});
      session.run(global_variables_initializer());
      t.push_back(seconds_on(device, [&] {
        for (const Tensor& batch : fresh_batches) t2.insert(batch, zero_rows);
      }));
      sink += static_cast<double>(t2.size());
    }
    const double s = median(t);
    const std::string name = reserved ? "insert_1M_reserved" : "insert_1M_growing";
    std::printf("%-28s %8.1f ms  %.1f M keys/s  (%.2f of the limit)\n", name.c_str(), s * 1e3,
                static_cast<double>(kKeys) / s / 1e6, limit_s / s);
    rows.push_back({name,
                    {{"ms", s * 1e3},
                     {"M_keys_per_s", static_cast<double>(kKeys) / s / 1e6},
                     {"fraction_of_limit", limit_s / s}}});
  }

  return finish();
}
