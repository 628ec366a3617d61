#include "kernels/cpu/training_ops.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/hash_index.h"
#include "kernels/cpu/thread_scratch.h"

namespace varstate::kernels::cpu {
namespace {

// Runs fn(begin, end) over [0, n) items of `bytes_per_item` each, on the
// pool when the work is large enough. Items are independent, so the split
// does not change any result.
template <typename Fn>
void for_range(int64_t n, double bytes_per_item, double cycles_per_item, Fn&& fn) {
  if (n <= 0) return;
  if (static_cast<double>(n) * bytes_per_item < kParallelBytesThreshold) {
    fn(int64_t{0}, n);
    return;
  }
  eigen_device().parallelFor(
      n, Eigen::TensorOpCost(bytes_per_item, bytes_per_item, cycles_per_item),
      [&fn](Eigen::Index begin, Eigen::Index end) { fn(int64_t{begin}, int64_t{end}); });
}

// The positions of `indices` grouped by row: `order` lists them row by
// row, each row's in their original order, the rows in the order the
// indices first name them; heads[s] is where row s's run starts (n
// appended). Linear, with no sort: one pass numbers the rows as they first
// appear (a per-thread scratch entry per table row, written only where an
// index points: nothing to clear; or, for a table much larger than the
// batch, a hash index of the batch's rows), one counts each row's
// positions, one places them.
template <typename Index>
void segments(const Index* indices, int64_t n, int64_t rows, std::vector<int64_t>& order,
              std::vector<int64_t>& heads) {
  std::vector<int32_t> segment_of_position(static_cast<size_t>(n));
  heads.clear();  // first the count of each segment
  // segment_of(row): the row's segment, the next number if it has none.
  auto number = [&](auto&& segment_of) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t s = segment_of(static_cast<int64_t>(indices[j]));
      if (s == std::ssize(heads)) heads.push_back(0);
      segment_of_position[static_cast<size_t>(j)] = static_cast<int32_t>(s);
      ++heads[static_cast<size_t>(s)];
    }
  };
  if (rows <= std::max<int64_t>(int64_t{1} << 22, 8 * n)) {
    ThreadScratch<int32_t> scratch(static_cast<size_t>(rows));
    int32_t* const segment_of_row = scratch.data();
    for (int64_t j = 0; j < n; ++j) segment_of_row[indices[j]] = -1;
    number([&](int64_t row) {
      int32_t& s = segment_of_row[row];
      if (s < 0) s = static_cast<int32_t>(heads.size());
      return int64_t{s};
    });
  } else {
    HashIndex segment_of_row(n);
    number([&](int64_t row) { return segment_of_row.insert(row, std::ssize(heads)); });
  }
  int64_t start = 0;
  for (int64_t& h : heads) start += std::exchange(h, start);
  heads.push_back(n);
  order.resize(static_cast<size_t>(n));
  std::vector<int64_t> next(heads.begin(), heads.end() - 1);
  for (int64_t j = 0; j < n; ++j) {
    order[static_cast<size_t>(
        next[static_cast<size_t>(segment_of_position[static_cast<size_t>(j)])]++)] = j;
  }
}

// The dense element loop: update_element's arithmetic on pointers that
// alias nothing (the slots do not overlap: training_ops.h), so that the
// compiler vectorizes it without run-time overlap checks. It is built
// once per instruction set below and per value of the flags the formulas
// branch on (`A`: Momentum's and Adam's use_nesterov, Ftrl's square-root
// power; `B`: Ftrl's shrinkage), each a constant in its loop. The file is
// built with -ffp-contract=off, so no multiply-add is ever fused, and lane
// width changes no result: IEEE addition, multiplication, division and
// square root round each element alike.
template <TrainingOp Op, typename T, typename C>
inline void dense_loop(const TrainingParams<C>& p, T* __restrict var, T* __restrict s0,
                       T* __restrict s1, T* __restrict s2, const T* __restrict grad, int64_t begin,
                       int64_t end) {
  const TrainingSlots<T> slots{var, s0, s1, s2};
  for (int64_t i = begin; i < end; ++i) update_element<Op, false>(p, slots, i, load_as<C>(grad[i]));
}

template <TrainingOp Op, bool A, bool B, typename T, typename C>
inline void dense_elements(const TrainingParams<C>& p, const TrainingSlots<T>& slots, const T* grad,
                           int64_t begin, int64_t end) {
  TrainingParams<C> q = p;
  if constexpr (Op == TrainingOp::kFtrl) {
    q.sqrt_power = A;
    q.shrinkage = B;
  } else {
    q.use_nesterov = A;
  }
  dense_loop<Op, T, C>(q, slots.var, slots.s0, slots.s1, slots.s2, grad, begin, end);
}

template <typename T, typename C>
using DenseElementsFn = void (*)(const TrainingParams<C>&, const TrainingSlots<T>&, const T*,
                                 int64_t, int64_t);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// `flatten` inlines the loop and the functors into each variant, where they
// are compiled (and vectorized) for its target; nothing the variants call
// out of line is built for a wider target than the baseline.
#ifdef __clang__
#define VARSTATE_AVX512_TARGET "avx512f,avx512vl,avx512bw"
#else
#define VARSTATE_AVX512_TARGET "avx512f,avx512vl,avx512bw,prefer-vector-width=512"
#endif

template <TrainingOp Op, bool A, bool B, typename T, typename C>
__attribute__((target(VARSTATE_AVX512_TARGET), flatten)) void dense_elements_avx512(
    const TrainingParams<C>& p, const TrainingSlots<T>& slots, const T* grad, int64_t begin,
    int64_t end) {
  dense_elements<Op, A, B>(p, slots, grad, begin, end);
}

template <TrainingOp Op, bool A, bool B, typename T, typename C>
__attribute__((target("avx2"), flatten)) void dense_elements_avx2(const TrainingParams<C>& p,
                                                                  const TrainingSlots<T>& slots,
                                                                  const T* grad, int64_t begin,
                                                                  int64_t end) {
  dense_elements<Op, A, B>(p, slots, grad, begin, end);
}

template <TrainingOp Op, bool A, bool B, typename T, typename C>
DenseElementsFn<T, C> dense_elements_for_cpu() {
  switch (cpu_isa()) {
    case Isa::kAvx512:
      return &dense_elements_avx512<Op, A, B, T, C>;
    case Isa::kAvx2:
      return &dense_elements_avx2<Op, A, B, T, C>;
    case Isa::kBaseline:
      break;
  }
  return &dense_elements<Op, A, B, T, C>;
}
#else
template <TrainingOp Op, bool A, bool B, typename T, typename C>
DenseElementsFn<T, C> dense_elements_for_cpu() {
  return &dense_elements<Op, A, B, T, C>;
}
#endif

// The loop for p's flags on this CPU.
template <TrainingOp Op, typename T, typename C>
DenseElementsFn<T, C> dense_elements_for(const TrainingParams<C>& p) {
  if constexpr (Op == TrainingOp::kFtrl) {
    if (p.sqrt_power) {
      return p.shrinkage ? dense_elements_for_cpu<Op, true, true, T, C>()
                         : dense_elements_for_cpu<Op, true, false, T, C>();
    }
    return p.shrinkage ? dense_elements_for_cpu<Op, false, true, T, C>()
                       : dense_elements_for_cpu<Op, false, false, T, C>();
  } else if constexpr (Op == TrainingOp::kMomentum || Op == TrainingOp::kAdam) {
    return p.use_nesterov ? dense_elements_for_cpu<Op, true, false, T, C>()
                          : dense_elements_for_cpu<Op, false, false, T, C>();
  } else {
    return dense_elements_for_cpu<Op, false, false, T, C>();
  }
}

}  // namespace

template <typename T>
void apply_dense(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                 const T* grad, int64_t n, int64_t row_width) {
  using C = training_compute_t<T>;
  const TrainingParams<C> p = training_params<T, C>(hyper);
  dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    const double bytes = sizeof(T) * (2.0 + training_slot_count(kOp));
    if constexpr (kOp == TrainingOp::kRowwiseAdagrad) {
      const int64_t rows = row_width > 0 ? n / row_width : 0;
      for_range(rows, bytes * static_cast<double>(row_width), 8.0 * row_width,
                [&](int64_t begin, int64_t end) {
                  for (int64_t r = begin; r < end; ++r) {
                    const T* g = grad + r * row_width;
                    rowwise_adagrad_row(p, slots, r, row_width,
                                        [g](int64_t c) { return load_as<C>(g[c]); });
                  }
                });
    } else {
      const DenseElementsFn<T, C> elements = dense_elements_for<kOp, T, C>(p);
      for_range(n, bytes, 8.0,
                [&](int64_t begin, int64_t end) { elements(p, slots, grad, begin, end); });
    }
  });
}

template <typename T, typename Index>
void apply_sparse(TrainingOp op, const TrainingHyper& hyper, const TrainingSlots<T>& slots,
                  int64_t rows, int64_t row_width, const Index* indices, int64_t num_indices,
                  const T* grad, bool /*deterministic*/) {
  using C = training_compute_t<T>;
  const TrainingParams<C> p = training_params<T, C>(hyper);
  std::vector<int64_t> order;
  std::vector<int64_t> heads;
  segments(indices, num_indices, rows, order, heads);
  const int64_t num_segments = static_cast<int64_t>(heads.size()) - 1;
  const int64_t w = row_width;
  // Segment s's gradient row, summed into buf (row_width elements).
  auto sum_row = [&](int64_t s, C* buf) {
    const T* first = grad + order[heads[s]] * w;
    for (int64_t c = 0; c < w; ++c) buf[c] = round_through<T>(C(0) + load_as<C>(first[c]));
    for (int64_t q = heads[s] + 1; q < heads[s + 1]; ++q) {
      const T* row = grad + order[q] * w;
      for (int64_t c = 0; c < w; ++c) buf[c] = round_through<T>(buf[c] + load_as<C>(row[c]));
    }
  };
  auto row_of = [&](int64_t s) { return static_cast<int64_t>(indices[order[heads[s]]]); };
  dispatch_training_op(op, [&](auto tag) {
    constexpr TrainingOp kOp = decltype(tag)::value;
    const double bytes = sizeof(T) * (2.0 + training_slot_count(kOp)) * static_cast<double>(w);
    if constexpr (kOp == TrainingOp::kAdam) {
      std::vector<int64_t> segment_of(rows, -1);
      for (int64_t s = 0; s < num_segments; ++s) segment_of[row_of(s)] = s;
      for_range(rows, bytes, 12.0 * w, [&](int64_t begin, int64_t end) {
        std::vector<C> buf(w);
        for (int64_t r = begin; r < end; ++r) {
          const int64_t s = segment_of[r];
          if (s < 0) {
            for (int64_t i = r * w; i < (r + 1) * w; ++i) adam_decay_element(p, slots, i);
            continue;
          }
          sum_row(s, buf.data());
          for (int64_t c = 0; c < w; ++c) update_element<kOp, true>(p, slots, r * w + c, buf[c]);
        }
      });
    } else if constexpr (kOp != TrainingOp::kGradientDescent) {
      for_range(num_segments, bytes, 8.0 * w, [&](int64_t begin, int64_t end) {
        std::vector<C> buf(w);
        for (int64_t s = begin; s < end; ++s) {
          sum_row(s, buf.data());
          const int64_t row = row_of(s);
          if constexpr (kOp == TrainingOp::kRowwiseAdagrad) {
            rowwise_adagrad_row(p, slots, row, w, [&buf](int64_t c) { return buf[c]; });
          } else {
            for (int64_t c = 0; c < w; ++c)
              update_element<kOp, true>(p, slots, row * w + c, buf[c]);
          }
        }
      });
    }
  });
}

#define VARSTATE_INSTANTIATE(E, T)                                                        \
  template void apply_dense<T>(TrainingOp, const TrainingHyper&, const TrainingSlots<T>&, \
                               const T*, int64_t, int64_t);                               \
  template void apply_sparse<T, int32_t>(TrainingOp, const TrainingHyper&,                \
                                         const TrainingSlots<T>&, int64_t, int64_t,       \
                                         const int32_t*, int64_t, const T*, bool);        \
  template void apply_sparse<T, int64_t>(TrainingOp, const TrainingHyper&,                \
                                         const TrainingSlots<T>&, int64_t, int64_t,       \
                                         const int64_t*, int64_t, const T*, bool);
VARSTATE_FOR_EACH_TRAINING_TYPE(VARSTATE_INSTANTIATE)
#undef VARSTATE_INSTANTIATE

}  // namespace varstate::kernels::cpu
