#include "kernels/cpu/training_ops.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cpu/eigen_support.h"

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

// The positions of `indices` sorted stably by index, and where each run
// of one index starts (with n appended).
template <typename Index>
void segments(const Index* indices, int64_t n, std::vector<int64_t>& order,
              std::vector<int64_t>& heads) {
  order.resize(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [indices](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  heads.clear();
  for (int64_t q = 0; q < n; ++q) {
    if (q == 0 || indices[order[q]] != indices[order[q - 1]]) heads.push_back(q);
  }
  heads.push_back(n);
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
      for_range(n, bytes, 8.0, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          update_element<kOp, false>(p, slots, i, load_as<C>(grad[i]));
      });
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
  segments(indices, num_indices, order, heads);
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
