// The sparse ops against a "touch the rows" limit: for a given set of ids,
// the least memory work any implementation of the op must do.
//
// For ids with U distinct rows out of M:
//   scatter_update           read the M update rows once; write each of
//                            the U table rows once (the last update wins);
//   scatter_add/mul,         read the M update rows once; read and write
//   sparse gradient descent  each of the U table rows once;
//   sparse Adagrad           the same with 2 tables (var, accum);
//   lazy Adam                the same with 3 tables (var, m, v);
//   gather                   read each of the U table rows once; write the
//                            M output rows.
// The limit pass does exactly that and computes nothing (class Limit): in
// blocks of positions, each distinct row first named in the block XORed in
// place with that update row (a gather: its words summed) in every table,
// the next ones prefetched, then every update row of the block read (a
// gather's output rows written); the row width a constant. It runs on the
// calling thread and split over the pool, and the faster counts. Which
// positions name a row first is computed beforehand, untimed: finding the
// distinct rows is part of the op, not of the limit. Each op runs through
// the public call on a variable of its own (the limit on arrays of the
// same sizes), the two alternating, medians of the pairs, after 7 untimed
// calls of the op (the first touches, and the calls in which a scatter
// learns whether a split pays here). The result is limit / op: 1 is at
// the limit. A pass this plain is not always the fastest way to touch
// those rows: where the op overlaps its misses better (narrow rows held in
// cache) it can come out above 1.
//
//   bench_sparse_limit [--quick] [--only OP] [--dist uniform|zipf] [--width D]
//                      [--ids M] [--dtype float32|bfloat16|float16]
//                      [--numbering auto|sort|lookup|both] [--reps N]
//                      [--out F.json] [--machine NAME]
// --dtype: the tables' and updates' type (float32 by default); the limit
// moves the same bytes (a row of D 16-bit values is D / 2 words).
// --numbering: how the training ops number their distinct rows
// (kernels/cpu/training_ops.h, RowNumbering): chosen per call (auto), or
// forced; "both" times sorted and looked-up numbering alternately, call by
// call in one process (this VM's noise moves whole runs 10-15 %, often
// more; alternating calls cancels it), each reported against the limit.
//
// Cases: a [1M, D] float32 table, D in {16, 64}; M in {1,024, 65,536,
// 1,048,576} ids, uniform or Zipf(1.1) over the rows (shuffled, so hot rows
// are not neighbours). --quick: M up to 65,536. --ids M: those M ids
// alone, any count from 1 to 4M.
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/training_ops.h"
#include "timing.h"
#include "varstate/device_manager.h"
#include "varstate/gather.h"
#include "varstate/graph.h"
#include "varstate/indexed_slices.h"
#include "varstate/scatter.h"
#include "varstate/training_ops.h"
#include "varstate/variable.h"

using namespace varstate;
using varstate::bench::median;
using varstate::bench::seconds_of_call;

namespace {

constexpr int64_t kRows = 1 << 20;
constexpr int64_t kAhead = 16;     // distinct rows prefetched ahead in the limit pass
constexpr int64_t kMaxWidth = 64;  // the widest rows of the cases

// The positions that first name their row, ascending.
std::vector<int64_t> first_positions(const std::vector<int64_t>& ids) {
  std::vector<uint8_t> seen(static_cast<size_t>(kRows));
  std::vector<int64_t> firsts;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto& s = seen[static_cast<size_t>(ids[i])];
    if (!s) firsts.push_back(static_cast<int64_t>(i));
    s = 1;
  }
  return firsts;
}

// What the limit does with a distinct row: overwrite it (scatter_update:
// its last update wins, and writing it needs no read), read and write it
// (the combining scatters, the optimizers, in each table), or read it (a
// gather, which then writes the output rows).
enum class Touch {
  kWrite,
  kReadWrite,
  kRead
};

// The limit's buffers, allocated and filled as the variables' and the
// updates are (the same allocator, pages and huge-page advice; the words
// are handled as integers): up to 3 tables of kRows x width words and the
// M update rows (a gather's output rows).
//
// The pass goes over the positions in blocks of kBlock, each block in two
// loops: the distinct rows first named in the block are touched in each
// table (overwritten, XORed with their update row, or read), the next rows
// prefetched kAhead ahead; then every update row of the block is read (a
// gather's output row written), sequentially, mostly from the cache the
// first loop filled. No branch per position, and the row width a constant.
// It runs twice per call, on the calling thread alone and split over the
// pool in contiguous ranges (a row is touched by the thread owning the
// position that first names it: no races), and the faster counts: the
// limit does not inherit the kernels' choice of when to split.
class Limit {
 public:
  explicit Limit(int64_t width) : width_(width) {
    for (int t = 0; t < 3; ++t) {
      tables_.push_back(Tensor::filled(DType::kFloat, {kRows, width}, Tensor(0.5f),
                                       DeviceManager::instance().cpu()));
      bases_.push_back(static_cast<uint32_t*>(tables_.back().raw_data()));
    }
  }

  // Seconds of the faster of the two passes (serial, split).
  double seconds(const std::vector<int64_t>& ids, const std::vector<int64_t>& firsts, Touch touch,
                 int tables) {
    const int64_t elements = std::ssize(ids) * width_;
    if (rows_.num_elements() != elements) {
      rows_ = Tensor::filled(DType::kFloat, {elements}, Tensor(0.001f),
                             DeviceManager::instance().cpu());
    }
    double best = 1e30;
    for (const bool split : {false, true}) {
      best = std::min(best, seconds_of_call([&] { run(ids, firsts, touch, tables, split); }));
    }
    return best;
  }

 private:
  static constexpr int64_t kBlock = 256;

  void run(const std::vector<int64_t>& ids, const std::vector<int64_t>& firsts, Touch touch,
           int tables, bool split) {
    kernels::with_constant<8, 16, 32, 64>(width_, [&](auto w) {
      if constexpr (std::is_same_v<decltype(w), int64_t>) {
        std::fprintf(stderr, "bench_sparse_limit: width %lld has no limit pass\n",
                     static_cast<long long>(w));
        std::abort();
      } else {
        switch (touch) {
          case Touch::kWrite:
            return dispatch<Touch::kWrite, decltype(w)::value>(ids, firsts, tables, split);
          case Touch::kReadWrite:
            return dispatch<Touch::kReadWrite, decltype(w)::value>(ids, firsts, tables, split);
          case Touch::kRead:
            return dispatch<Touch::kRead, decltype(w)::value>(ids, firsts, tables, split);
        }
      }
    });
  }

  template <Touch kTouch, int64_t kW>
  void dispatch(const std::vector<int64_t>& ids, const std::vector<int64_t>& firsts, int tables,
                bool split) {
    switch (tables) {
      case 1:
        return pass<kTouch, kW, 1>(ids, firsts, split);
      case 2:
        return pass<kTouch, kW, 2>(ids, firsts, split);
      default:
        return pass<kTouch, kW, 3>(ids, firsts, split);
    }
  }

  template <Touch kTouch, int64_t kW, int kTables>
  void pass(const std::vector<int64_t>& ids, const std::vector<int64_t>& firsts, bool split) {
    const auto m = std::ssize(ids);
    uint32_t* const* bases = bases_.data();
    uint32_t* const rows = static_cast<uint32_t*>(rows_.raw_data());
    const int64_t* const id = ids.data();
    const int64_t* const fp = firsts.data();
    const int64_t u = std::ssize(firsts);
    std::atomic<uint32_t> total{0};
    auto body = [&](int64_t b, int64_t e) {
      alignas(64) uint32_t lanes[kW] = {};
      // firsts[k0, k1): the distinct rows first named in [b, e).
      int64_t k = std::lower_bound(fp, fp + u, b) - fp;
      const int64_t k_end = std::lower_bound(fp, fp + u, e) - fp;
      const auto prefetch = [&](int64_t kk) {
        const int64_t at = id[fp[kk]] * kW;
        for (int t = 0; t < kTables; ++t) {
          constexpr auto kFor = kTouch == Touch::kRead ? kernels::cpu::PrefetchFor::kRead
                                                       : kernels::cpu::PrefetchFor::kWrite;
          kernels::cpu::prefetch_bytes<kFor>(bases[t] + at, kW * 4);
        }
      };
      for (int64_t kk = k; kk < std::min(k_end, k + kAhead); ++kk) prefetch(kk);
      for (int64_t block = b; block < e; block += kBlock) {
        const int64_t block_end = std::min(e, block + kBlock);
        for (; k < k_end && fp[k] < block_end; ++k) {
          if (k + kAhead < k_end) prefetch(k + kAhead);
          const int64_t i = fp[k];
          const uint32_t* __restrict upd = rows + i * kW;
          for (int t = 0; t < kTables; ++t) {
            uint32_t* __restrict row = bases[t] + id[i] * kW;
            for (int64_t c = 0; c < kW; ++c) {
              if constexpr (kTouch == Touch::kRead) {
                lanes[c] += row[c];
              } else if constexpr (kTouch == Touch::kWrite) {
                row[c] = upd[c];
              } else {
                row[c] ^= upd[c];
              }
            }
          }
        }
        for (int64_t i = block; i < block_end; ++i) {
          uint32_t* __restrict upd = rows + i * kW;
          for (int64_t c = 0; c < kW; ++c) {
            if constexpr (kTouch == Touch::kRead) {
              upd[c] = lanes[c];
            } else {
              lanes[c] ^= upd[c];
            }
          }
        }
      }
      uint32_t acc = 0;
      for (int64_t c = 0; c < kW; ++c) acc ^= lanes[c];
      total.fetch_xor(acc, std::memory_order_relaxed);
    };
    if (split) {
      kernels::cpu::for_ranges(m, kBlock, 1, 0, body);
    } else {
      body(0, m);
    }
    sink_ ^= total.load();
  }

  int64_t width_;
  std::vector<Tensor> tables_;
  std::vector<uint32_t*> bases_;
  Tensor rows_;
  uint32_t sink_ = 0;
};

Variable table(DType dtype, int64_t width, float value, const std::string& name) {
  Variable v(Tensor::filled(dtype, {kRows, width}, Tensor(value), DeviceManager::instance().cpu()),
             {.name = name});
  v.initializer().run();
  return v;
}

struct Result {
  std::string op, dist, numbering;
  int64_t width, ids, distinct;
  double op_s, limit_s;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int reps = 9;
  int64_t only_width = 0, only_ids = 0;
  DType dtype = DType::kFloat;
  std::string out, machine, only, only_dist, numbering = "auto";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--dist" && i + 1 < argc) {
      only_dist = argv[++i];
    } else if (a == "--width" && i + 1 < argc) {
      only_width = std::atoll(argv[++i]);
    } else if (a == "--ids" && i + 1 < argc) {
      only_ids = std::atoll(argv[++i]);
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "float32" && d != "bfloat16" && d != "float16") {
        std::fprintf(stderr,
                     "bench_sparse_limit: --dtype %s: expected float32, bfloat16 or float16\n",
                     d.c_str());
        return 2;
      }
      dtype = d == "bfloat16" ? DType::kBFloat16 : d == "float16" ? DType::kHalf : DType::kFloat;
    } else if (a == "--numbering" && i + 1 < argc) {
      numbering = argv[++i];
      if (numbering != "auto" && numbering != "sort" && numbering != "lookup" &&
          numbering != "both") {
        std::fprintf(stderr,
                     "bench_sparse_limit: --numbering %s: expected auto, sort, lookup or both\n",
                     numbering.c_str());
        return 2;
      }
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--machine" && i + 1 < argc) {
      machine = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: bench_sparse_limit [--quick] [--only OP] [--dist uniform|zipf] [--width D] "
          "[--ids M] [--dtype float32|bfloat16|float16] [--numbering auto|sort|lookup|both] "
          "[--reps N] [--out F.json] [--machine NAME]\n");
      return 2;
    }
  }
  // A filter that matches no case is a mistake, not an empty run.
  constexpr int64_t kWidths[] = {16, 64};
  constexpr int64_t kIdCounts[] = {1024, 65536, 1048576};
  const auto no_case = [](const char* flag, const std::string& value) {
    std::fprintf(stderr, "bench_sparse_limit: %s %s matches no case\n", flag, value.c_str());
    return 2;
  };
  const auto listed = [](const auto& list, const auto& value) {
    return std::find(std::begin(list), std::end(list), value) != std::end(list);
  };
  const std::string kOps[] = {"scatter_update", "scatter_add",    "scatter_mul", "gather",
                              "sparse_sgd",     "sparse_adagrad", "lazy_adam"};
  if (!only.empty() && !listed(kOps, only)) return no_case("--only", only);
  if (!only_dist.empty() && only_dist != "uniform" && only_dist != "zipf") {
    return no_case("--dist", only_dist);
  }
  if (only_width != 0 && !listed(kWidths, only_width)) {
    return no_case("--width", std::to_string(only_width));
  }
  if (only_ids < 0 || only_ids > kRows * 4) {  // any other count runs as a case of its own
    return no_case("--ids", std::to_string(only_ids));
  }
  if (machine.empty()) {
    utsname u{};
    uname(&u);
    machine = u.nodename;
  }
  std::vector<Result> results;
  for (const int64_t width : kWidths) {
    if (only_width != 0 && only_width != width) continue;
    reset_default_graph();
    Variable var = table(dtype, width, 0.5f, "var");
    Variable accum = table(dtype, width, 0.1f, "accum");
    Variable m = table(dtype, width, 0.0f, "m");
    Variable v = table(dtype, width, 0.0f, "v");
    Limit limit(width * static_cast<int64_t>(dtype_size(dtype)) / 4);
    std::vector<int64_t> counts(std::begin(kIdCounts), std::end(kIdCounts));
    if (only_ids != 0) counts = {only_ids};
    for (const int64_t count : counts) {
      if (quick && count > 65536) continue;
      for (const bool zipf : {false, true}) {
        if (!only_dist.empty() && only_dist != (zipf ? "zipf" : "uniform")) continue;
        const std::vector<int64_t> ids =
            bench::random_positions(kRows, count, zipf, 11 + static_cast<uint64_t>(count));
        const std::vector<int64_t> firsts = first_positions(ids);
        const int64_t distinct = std::ssize(firsts);
        const Tensor idx = Tensor::from_vector<int64_t>(ids);
        const Tensor upd =
            Tensor::filled(dtype, {count, width}, Tensor(0.001f), DeviceManager::instance().cpu());
        // Factors of 1 for scatter_mul: repeated calls must not drift the
        // rows into denormals (which would time the FPU's slow path).
        const Tensor ones =
            Tensor::filled(dtype, {count, width}, Tensor(1.0f), DeviceManager::instance().cpu());
        const IndexedSlices grad(upd, idx);
        struct Case {
          const char* op;
          Touch touch;
          int tables;
          std::function<void()> run;
        };
        const std::vector<Case> cases = {
            {"scatter_update", Touch::kWrite, 1, [&] { scatter_update(var, idx, upd); }},
            {"scatter_add", Touch::kReadWrite, 1, [&] { scatter_add(var, idx, upd); }},
            {"scatter_mul", Touch::kReadWrite, 1, [&] { scatter_mul(var, idx, ones); }},
            {"gather", Touch::kRead, 1, [&] { (void)gather(var, idx); }},
            {"sparse_sgd", Touch::kReadWrite, 1,
             [&] { sparse_apply_gradient_descent(var, 0.001f, grad); }},
            {"sparse_adagrad", Touch::kReadWrite, 2,
             [&] { sparse_apply_adagrad(var, accum, 0.001f, grad); }},
            {"lazy_adam", Touch::kReadWrite, 3,
             [&] {
               sparse_apply_lazy_adam(var, m, v, 0.9f, 0.999f, 0.001f, 0.9f, 0.999f, 1e-8f, grad);
             }},
        };
        for (const Case& c : cases) {
          if (!only.empty() && only != c.op) continue;
          // The ways the training ops number their rows (the scatters and
          // gather have one): with "both", sorted and looked up alternate
          // call by call, against the same limit passes.
          using kernels::cpu::RowNumbering;
          const bool trains = c.tables > 1;
          std::vector<std::string> ways = {trains ? numbering : "auto"};
          if (ways[0] == "both") ways = {"sort", "lookup"};
          std::vector<RowNumbering> hows;
          for (const std::string& way : ways) {
            hows.push_back(way == "sort"     ? RowNumbering::kSort
                           : way == "lookup" ? RowNumbering::kLookUp
                                             : RowNumbering::kAuto);
          }
          const auto run_as = [&](size_t k) {
            kernels::cpu::sparse_row_numbering() = hows[k];
            const double s = seconds_of_call(c.run);
            kernels::cpu::sparse_row_numbering() = RowNumbering::kAuto;
            return s;
          };
          // Untimed: the first touches, and the calls in which a scatter
          // learns whether a split pays here (kernels::cpu::SplitTrials):
          // the steady state of a program calling the op again and again.
          for (int warm = 0; warm < 1 + 2 * kernels::cpu::SplitTrials::kSamples; ++warm) {
            for (size_t k = 0; k < ways.size(); ++k) (void)run_as(k);
          }
          (void)limit.seconds(ids, firsts, c.touch, c.tables);
          std::vector<std::vector<double>> op_s(ways.size());
          std::vector<double> limit_s;
          for (int r = 0; r < reps; ++r) {
            for (size_t k = 0; k < ways.size(); ++k) {
              const size_t at = r % 2 == 0 ? k : ways.size() - 1 - k;  // alternate who goes first
              op_s[at].push_back(run_as(at));
            }
            limit_s.push_back(limit.seconds(ids, firsts, c.touch, c.tables));
          }
          for (size_t k = 0; k < ways.size(); ++k) {
            const Result res{c.op,     zipf ? "zipf" : "uniform", ways[k],        width, count,
                             distinct, median(op_s[k]),           median(limit_s)};
            std::printf(
                "%-15s D%-3lld M%-8lld %-7s distinct %-8lld %9.3f ms  limit %9.3f ms  %.3f%s\n",
                res.op.c_str(), static_cast<long long>(width), static_cast<long long>(count),
                res.dist.c_str(), static_cast<long long>(res.distinct), res.op_s * 1e3,
                res.limit_s * 1e3, res.limit_s / res.op_s,
                trains && numbering != "auto" ? ("  " + res.numbering).c_str() : "");
            std::fflush(stdout);
            results.push_back(res);
          }
        }
      }
    }
  }
  if (!out.empty()) {
    std::ofstream f(out);
    f << "{\n  \"context\": {\"machine\": \"" << machine
      << "\", \"threads\": " << kernels::cpu::eigen_device().numThreads() << ", \"rows\": " << kRows
      << ", \"reps\": " << reps << "},\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      f << "    {\"op\": \"" << r.op << "\", \"dtype\": \"" << dtype_name(dtype)
        << "\", \"dist\": \"" << r.dist << "\", \"numbering\": \"" << r.numbering
        << "\", \"width\": " << r.width << ", \"ids\": " << r.ids
        << ", \"distinct\": " << r.distinct << ", \"ms\": " << r.op_s * 1e3
        << ", \"limit_ms\": " << r.limit_s * 1e3 << ", \"ratio_to_limit\": " << r.limit_s / r.op_s
        << "}" << (i + 1 < results.size() ? ",\n" : "\n");
    }
    f << "  ]\n}\n";
  }
  return 0;
}
