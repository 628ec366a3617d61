// Seeds of random ops: TensorFlow's rules for combining the graph-level seed
// (Graph::set_random_seed / set_random_seed) with an op-level seed.
//
// A random op runs a Philox generator keyed by a pair (seed, seed2). The
// pair comes from get_seed, following tf.compat.v1.get_seed:
//
//   graph seed   op seed   pair
//   unset        unset     none: the op draws a fresh pair every time it runs
//   unset        s         (DEFAULT_GRAPH_SEED, s)
//   g            s         (g, s)
//   g            unset     (g, n) with n the graph's op counter
//                          (Graph::next_op_id), so successive ops differ but
//                          a fresh graph built the same way repeats them
//
// Both values are reduced modulo 2^31 - 1 (Python's modulo: never negative),
// and a pair (0, 0) becomes (0, 2^31 - 1), since (0, 0) means "unseeded" to
// the kernels. The same pair gives the same values on every run, on the CPU
// and on a GPU.
#pragma once

#include <cstdint>
#include <optional>

#include "varstate/graph.h"

namespace varstate {

// The graph seed used when only an op seed is given.
inline constexpr int64_t DEFAULT_GRAPH_SEED = 87654321;

// tf.set_random_seed: sets the graph-level seed of the thread's default
// graph (Graph::set_random_seed for another graph); nullopt unsets it.
void set_random_seed(std::optional<int64_t> seed);

struct SeedPair {
  int64_t seed = 0;
  int64_t seed2 = 0;
  bool operator==(const SeedPair&) const = default;
};

// The pair for an op created now in `graph` (default: the thread's default
// graph) with `op_seed`; nullopt when neither seed is set. Advances the
// graph's op counter when it supplies the op seed. Thread-safe.
std::optional<SeedPair> get_seed(std::optional<int64_t> op_seed);
std::optional<SeedPair> get_seed(Graph& graph, std::optional<int64_t> op_seed);

// get_seed's pair, or two fresh non-deterministic seeds when it has none
// (what TensorFlow's kernels draw for an unseeded op). The pair a random op
// actually runs with.
SeedPair resolve_seed(std::optional<int64_t> op_seed);
SeedPair resolve_seed(Graph& graph, std::optional<int64_t> op_seed);

}  // namespace varstate
