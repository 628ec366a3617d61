// The input pipeline of `varstate demo`: a synthetic ratings matrix of known
// low rank plus Gaussian noise, and the order in which training visits it.
// Everything here is a pure function of the seed, so the same --seed gives
// the same data and the same batches on every platform and standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace varstate::cli {

// SplitMix64: a fully specified generator, so the synthetic data are the
// same on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t below(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }
  double normal();  // Box-Muller

 private:
  uint64_t state_;
};

// One rating. Records, not one array per field: a batch reads random
// ratings, and a record costs one cache miss where three arrays cost three.
struct Rating {
  int32_t user, item;
  float value;
};

// The ratings, train or test.
struct Ratings {
  std::vector<Rating> rows;
  size_t size() const { return rows.size(); }
};

struct Dataset {
  Ratings train, test;
  double signal_stddev = 0;  // of the noiseless ratings
};

// The shape of the synthetic ratings. The caller checks the sizes: ids fit
// int32 and users x ratings_per_user, users x rank, items x rank fit memory.
struct DatasetOptions {
  int64_t users = 0;
  int64_t items = 0;
  int64_t rank = 0;
  int64_t ratings_per_user = 0;
  double noise = 0;
  int64_t seed = 0;
};

// Ratings of users x items factors of the given rank plus noise: every user
// rates ratings_per_user random items, one rating in ten is held out as test.
Dataset make_dataset(const DatasetOptions& o);
// The same from a demo's flags (any struct with these fields).
template <typename Flags>
Dataset dataset_of(const Flags& o) {
  return make_dataset({.users = o.users,
                       .items = o.items,
                       .rank = o.rank,
                       .ratings_per_user = o.ratings_per_user,
                       .noise = o.noise,
                       .seed = o.seed});
}

// The training order: epoch e visits the training ratings in a permutation
// seeded by (seed, e); step s takes batch s % steps_per_epoch of epoch
// s / steps_per_epoch.
class Batches {
 public:
  Batches(size_t n, int64_t batch_size, int64_t seed)
      : n_(n), batch_(static_cast<size_t>(batch_size)), seed_(seed) {}
  int64_t steps_per_epoch() const { return static_cast<int64_t>((n_ + batch_ - 1) / batch_); }
  // Positions in the training set of step `step`'s ratings.
  std::pair<const uint32_t*, size_t> batch(int64_t step);

 private:
  void shuffle(int64_t epoch);
  size_t n_, batch_;
  int64_t seed_, epoch_ = -1;
  std::vector<uint32_t> order_;
};

}  // namespace varstate::cli
