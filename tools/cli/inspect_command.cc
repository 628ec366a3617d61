// `varstate inspect PATH [--tensor NAME]`: what a checkpoint holds.
//
// Lists every tensor of a checkpoint (varstate's, TensorFlow V2 or V1):
// name, dtype, shape, data shard (or saved slices), bytes, and min / max /
// mean of numeric tensors. With --tensor, prints that tensor's values. For
// a delta of an incremental checkpoint, first shows its chain (the base,
// each delta's step, rows and bytes per tensor); the listing is then of the
// values the chain restores.
#include <CLI/CLI.hpp>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "commands.h"
#include "varstate/checkpoint_chain.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"
#include "varstate/tensor.h"

namespace varstate::cli {
namespace {

struct Stats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  int64_t count = 0;
};

template <typename T>
void accumulate(const TensorData& data, Stats& s) {
  const size_t n = data.bytes.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data.bytes.data() + i * sizeof(T), sizeof(T));
    double d;
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      d = static_cast<float>(v);
    } else {
      d = static_cast<double>(v);
    }
    if (std::isnan(d)) continue;
    s.min = std::min(s.min, d);
    s.max = std::max(s.max, d);
    s.sum += d;
    ++s.count;
  }
}

// min/max/mean of a real numeric tensor; nullopt for bool, string, complex.
std::optional<Stats> stats_of(const TensorData& data) {
  Stats s;
  switch (data.dtype) {
#define VARSTATE_STATS_CASE(E, T)                                                  \
  case DType::E:                                                                   \
    if constexpr (std::is_same_v<T, complex64> || std::is_same_v<T, complex128>) { \
      return std::nullopt;                                                         \
    } else {                                                                       \
      accumulate<T>(data, s);                                                      \
    }                                                                              \
    break;
    VARSTATE_FOR_EACH_NUMERIC_DTYPE(VARSTATE_STATS_CASE)
#undef VARSTATE_STATS_CASE
    default:
      return std::nullopt;
  }
  return s;
}

Tensor to_tensor(const TensorData& data) {
  Tensor t(data.dtype, TensorShape(data.shape));
  if (data.dtype == DType::kString) {
    for (size_t i = 0; i < data.strings.size(); ++i) t.data<std::string>()[i] = data.strings[i];
  } else if (!data.bytes.empty()) {
    std::memcpy(t.raw_data(), data.bytes.data(), data.bytes.size());
  }
  return t;
}

// The step of a checkpoint named "<prefix>-<step>", or "-".
std::string step_of(const std::string& path) {
  const auto dash = path.rfind('-');
  if (dash == std::string::npos || dash + 1 == path.size() ||
      path.find_first_not_of("0123456789", dash + 1) != std::string::npos) {
    return "-";
  }
  return path.substr(dash + 1);
}

// An incremental checkpoint's chain: the base, then per delta its step and
// the rows and bytes of each tensor it holds.
void print_chain(const std::vector<ChainLink>& chain) {
  std::printf("chain of %zu checkpoint(s): base %s (step %s)\n", chain.size(),
              chain.front().path.c_str(), step_of(chain.front().path).c_str());
  for (size_t i = 1; i < chain.size(); ++i) {
    int64_t total = 0;
    for (const DeltaEntry& e : chain[i].entries) total += e.bytes;
    std::printf("  delta %s (step %s): %lld bytes\n", chain[i].path.c_str(),
                step_of(chain[i].path).c_str(), static_cast<long long>(total));
    for (const DeltaEntry& e : chain[i].entries) {
      std::printf("    %-38s %14s %14lld bytes\n", e.key.c_str(),
                  e.rows < 0 ? "whole" : (std::to_string(e.rows) + " rows").c_str(),
                  static_cast<long long>(e.bytes));
    }
  }
}

int inspect(const std::string& path, const std::string& tensor) {
  std::unique_ptr<CheckpointReader> reader = open_checkpoint(path);

  if (!tensor.empty()) {
    TensorData data = reader->read(tensor);
    std::printf("%s %s %s\n%s\n", tensor.c_str(), std::string(dtype_name(data.dtype)).c_str(),
                shape_string(data.shape).c_str(), to_tensor(data).to_string().c_str());
    return 0;
  }

  if (const std::vector<ChainLink> chain = checkpoint_chain(path); chain.size() > 1) {
    print_chain(chain);
  }
  const std::vector<TensorInfo> infos = reader->list();
  std::printf("checkpoint %s: %zu tensor(s)\n", reader->path().c_str(), infos.size());
  std::printf("%-40s %-10s %-16s %-10s %14s %14s %14s %14s\n", "name", "dtype", "shape", "shard",
              "bytes", "min", "max", "mean");
  uint64_t total = 0;
  for (const TensorInfo& info : infos) {
    const bool readable = dtype_is_valid(static_cast<int>(info.dtype));
    std::string shard = info.slices.empty() ? (info.shard >= 0 ? std::to_string(info.shard) : "-")
                                            : std::to_string(info.slices.size()) + " slices";
    std::optional<TensorData> data;
    if (readable) data = reader->read(info.name);
    uint64_t bytes = 0;
    if (info.size >= 0) {
      bytes = static_cast<uint64_t>(info.size);
    } else if (data) {
      bytes = data->dtype == DType::kString ? 0 : data->bytes.size();
      for (const auto& s : data->strings) bytes += s.size();
    }
    total += bytes;
    std::string min = "-", max = "-", mean = "-";
    if (data) {
      if (auto s = stats_of(*data); s && s->count > 0) {
        char buf[3][32];
        std::snprintf(buf[0], sizeof buf[0], "%.6g", s->min);
        std::snprintf(buf[1], sizeof buf[1], "%.6g", s->max);
        std::snprintf(buf[2], sizeof buf[2], "%.6g", s->sum / static_cast<double>(s->count));
        min = buf[0], max = buf[1], mean = buf[2];
      }
    }
    std::printf("%-40s %-10s %-16s %-10s %14llu %14s %14s %14s\n", info.name.c_str(),
                readable ? std::string(dtype_name(info.dtype)).c_str()
                         : ("enum " + std::to_string(static_cast<int>(info.dtype))).c_str(),
                shape_string(info.shape).c_str(), shard.c_str(),
                static_cast<unsigned long long>(bytes), min.c_str(), max.c_str(), mean.c_str());
  }
  std::printf("total: %llu bytes\n", static_cast<unsigned long long>(total));
  return 0;
}

}  // namespace

Action add_inspect_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "inspect", "list a checkpoint's tensors: name, dtype, shape, shard, bytes, min/max/mean");
  auto path = std::make_shared<std::string>();
  auto tensor = std::make_shared<std::string>();
  cmd->add_option("path", *path,
                  "a checkpoint prefix (TensorFlow V2: PATH.index exists) or a V1 file or pattern")
      ->required();
  cmd->add_option("--tensor", *tensor, "print this tensor's values instead of the listing")
      ->check(CLI::Validator(
          [](const std::string& name) {
            return name.empty() ? std::string("a tensor name is required, got \"\"")
                                : std::string();
          },
          "NAME"));
  return [path, tensor] { return inspect(*path, *tensor); };
}

}  // namespace varstate::cli
