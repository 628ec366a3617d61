#include "demo_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace varstate::cli {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

Dataset make_dataset(const DatasetOptions& o) {
  Rng rng(static_cast<uint64_t>(o.seed) * 0x2545F4914F6CDD1Dull + 1);
  // Factors with entries of stddev rank^-1/4: noiseless ratings of variance 1.
  const double scale = std::pow(static_cast<double>(o.rank), -0.25);
  std::vector<float> u(static_cast<size_t>(o.users * o.rank)),
      v(static_cast<size_t>(o.items * o.rank));
  for (float& x : u) x = static_cast<float>(scale * rng.normal());
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  Dataset d;
  double sum2 = 0;
  const size_t n = static_cast<size_t>(o.users * o.ratings_per_user);
  for (Ratings* r : {&d.train, &d.test}) {
    r->rows.reserve(n / 9);
  }
  for (int64_t user = 0; user < o.users; ++user) {
    for (int64_t k = 0; k < o.ratings_per_user; ++k) {
      const int64_t item = rng.below(o.items);
      double dot = 0;
      for (int64_t j = 0; j < o.rank; ++j) dot += u[user * o.rank + j] * v[item * o.rank + j];
      sum2 += dot * dot;
      Ratings& r = (k % 10 == 9) ? d.test : d.train;
      r.rows.push_back({static_cast<int32_t>(user), static_cast<int32_t>(item),
                        static_cast<float>(dot + o.noise * rng.normal())});
    }
  }
  d.signal_stddev = std::sqrt(sum2 / static_cast<double>(n));
  return d;
}

std::pair<const uint32_t*, size_t> Batches::batch(int64_t step) {
  const int64_t epoch = step / steps_per_epoch();
  if (epoch != epoch_) shuffle(epoch);
  const size_t begin = static_cast<size_t>(step % steps_per_epoch()) * batch_;
  return {order_.data() + begin, std::min(batch_, n_ - begin)};
}

void Batches::shuffle(int64_t epoch) {
  order_.resize(n_);
  std::iota(order_.begin(), order_.end(), 0u);
  Rng rng(static_cast<uint64_t>(seed_) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 7);
  // Fisher-Yates. The swap partners are drawn kAhead swaps early and
  // prefetched: each is a random element of a 9 MB array (the same draws in
  // the same order, so the same permutation).
  constexpr size_t kAhead = 16;
  size_t partner[kAhead];
  auto draw = [&](size_t i) {
    const size_t j = static_cast<size_t>(rng.below(static_cast<int64_t>(i)));
    __builtin_prefetch(&order_[j], 1);
    return j;
  };
  for (size_t i = n_, k = 0; i > 1 && k < kAhead; --i, ++k) partner[k] = draw(i);
  for (size_t i = n_, k = 0; i > 1; --i, ++k) {
    const size_t slot = k % kAhead;
    const size_t j = partner[slot];
    if (i > kAhead + 1) partner[slot] = draw(i - kAhead);
    std::swap(order_[i - 1], order_[j]);
  }
  epoch_ = epoch;
}

}  // namespace varstate::cli
