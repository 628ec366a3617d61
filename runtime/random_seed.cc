#include "varstate/random_seed.h"

#include <mutex>
#include <random>

namespace varstate {
namespace {

constexpr int64_t kMaxInt32 = 2147483647;  // 2^31 - 1

// Python's `seed % (2**31 - 1)`: the result has the sign of the divisor.
int64_t truncate_seed(int64_t seed) {
  int64_t r = seed % kMaxInt32;
  return r < 0 ? r + kMaxInt32 : r;
}

int64_t fresh_seed() {
  static std::mutex mu;
  static std::random_device device;
  static std::mt19937_64 gen((static_cast<uint64_t>(device()) << 32) ^ device());
  std::lock_guard lock(mu);
  // Keep clear of 0 so that a fresh pair is never (0, 0).
  return static_cast<int64_t>(gen() | 1);
}

}  // namespace

std::optional<SeedPair> get_seed(std::optional<int64_t> op_seed) {
  return get_seed(get_default_graph(), op_seed);
}

std::optional<SeedPair> get_seed(Graph& graph, std::optional<int64_t> op_seed) {
  const std::optional<int64_t> graph_seed = graph.random_seed();
  SeedPair pair;
  if (graph_seed) {
    pair.seed = truncate_seed(*graph_seed);
    pair.seed2 = truncate_seed(op_seed ? *op_seed : graph.next_op_id());
  } else if (op_seed) {
    pair.seed = DEFAULT_GRAPH_SEED;
    pair.seed2 = truncate_seed(*op_seed);
  } else {
    return std::nullopt;
  }
  if (pair.seed == 0 && pair.seed2 == 0) pair.seed2 = kMaxInt32;
  return pair;
}

void set_random_seed(std::optional<int64_t> seed) { get_default_graph().set_random_seed(seed); }

SeedPair resolve_seed(std::optional<int64_t> op_seed) {
  return resolve_seed(get_default_graph(), op_seed);
}

SeedPair resolve_seed(Graph& graph, std::optional<int64_t> op_seed) {
  if (auto pair = get_seed(graph, op_seed)) return *pair;
  return SeedPair{fresh_seed(), fresh_seed()};
}

}  // namespace varstate
