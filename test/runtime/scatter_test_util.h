// Helpers for the runtime scatter tests (CPU and GPU): the naive reference
// of test/scatter_reference.h over tensors, random indices with duplicates,
// and divisors that are never zero.
#pragma once

#include <complex>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "scatter_reference.h"
#include "tensor_util.h"
#include "varstate/placement.h"
#include "varstate/scatter.h"
#include "varstate/variables.h"

namespace varstate::testing {

inline Tensor apply_scatter(ScatterOp op, Variable& v, const Tensor& indices, const Tensor& updates,
                            const UpdateOptions& options = {}) {
  switch (op) {
    case ScatterOp::kUpdate:
      return scatter_update(v, indices, updates, options);
    case ScatterOp::kAdd:
      return scatter_add(v, indices, updates, options);
    case ScatterOp::kSub:
      return scatter_sub(v, indices, updates, options);
    case ScatterOp::kMul:
      return scatter_mul(v, indices, updates, options);
    case ScatterOp::kDiv:
      return scatter_div(v, indices, updates, options);
    case ScatterOp::kMin:
      return scatter_min(v, indices, updates, options);
    case ScatterOp::kMax:
      return scatter_max(v, indices, updates, options);
  }
  return {};
}

// The expected table after the serial loop, as a CPU tensor.
template <typename T>
Tensor naive_scatter(ScatterOp op, const Tensor& table, const Tensor& indices,
                     const Tensor& updates) {
  std::vector<T> out = table.to_vector<T>();
  std::vector<int64_t> idx;
  if (indices.dtype() == DType::kInt32) {
    for (int32_t i : indices.to_vector<int32_t>()) idx.push_back(i);
  } else {
    idx = indices.to_vector<int64_t>();
  }
  const std::vector<T> u = updates.to_vector<T>();
  const int64_t width = table.shape().tail(1).num_elements();
  const bool scalar = u.size() == 1 && idx.size() * width != 1;
  reference_scatter(op, out.data(), width, idx, u, scalar);
  return Tensor::from_vector<T>(out, table.shape());
}

inline Tensor naive_scatter(ScatterOp op, const Tensor& table, const Tensor& indices,
                            const Tensor& updates) {
  return dispatch_numeric(table.dtype(), "naive_scatter", [&](auto tag) {
    Tensor t = naive_scatter<decltype(tag)>(op, table, indices, updates);
    Tensor typed(table.dtype(), table.shape());
    if (t.nbytes() != 0) std::memcpy(typed.raw_data(), t.raw_data(), t.nbytes());
    return typed;
  });
}

// `t`'s bytes as a tensor of `dtype` (same storage type): random_tensor
// makes quantized data with the plain integer dtype.
inline Tensor retyped(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out(dtype, t.shape());
  Tensor host = t.to_host();
  if (host.nbytes() != 0) std::memcpy(out.raw_data(), host.raw_data(), host.nbytes());
  return out;
}

inline Tensor random_values(DType dtype, const TensorShape& shape, uint64_t seed, int lo = -8,
                            int hi = 8) {
  return retyped(random_tensor(dtype, shape, seed, lo, hi), dtype);
}

// Indices in [0, rows) of `shape` and `dtype`; with `hot`, most of them hit a
// few rows (heavy duplicates).
inline Tensor random_indices(DType dtype, const TensorShape& shape, int64_t rows, uint64_t seed,
                             bool hot = false) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> any(0, rows - 1);
  std::uniform_int_distribution<int64_t> few(0, std::min<int64_t>(rows, 3) - 1);
  std::vector<int64_t> v(shape.num_elements());
  for (auto& x : v) x = hot && gen() % 4 != 0 ? few(gen) : any(gen);
  Tensor t = Tensor::from_vector<int64_t>(v, shape);
  return dtype == DType::kInt64 ? t : t.cast(DType::kInt32);
}

// Random updates for `op`: small integers, never zero for division, and
// for mul/div values in {1, 2, -1} (or {1, 2}) so that results stay
// bounded and exact.
inline Tensor random_updates(ScatterOp op, DType dtype, const TensorShape& shape, uint64_t seed) {
  if (op != ScatterOp::kMul && op != ScatterOp::kDiv) return random_values(dtype, shape, seed);
  Tensor t = random_tensor(dtype, shape, seed, 0, 2);
  return dispatch_numeric(dtype, "random_updates", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v = t.to_vector<T>();
    std::mt19937_64 gen(seed);
    for (auto& x : v) {
      if (to_double(x) == 0) {
        if constexpr (std::is_unsigned_v<T>)
          x = from_int<T>(1);
        else
          x = from_int<T>(gen() % 2 ? -1 : 1);
      }
    }
    Tensor out(dtype, shape);
    if (!v.empty()) std::memcpy(out.raw_data(), v.data(), v.size() * sizeof(T));
    return out;
  });
}

// A variable named `name` holding `value` on `device`, initialized.
inline Variable initialized_variable(const Tensor& value, const std::string& name,
                                     Device* device = nullptr) {
  // A variable goes where the device scopes say, whatever its value's device.
  std::optional<DeviceScope> scope;
  if (device != nullptr) scope.emplace(device->name());
  Variable v(device ? value.to(*device) : value, {.name = name});
  Session().run(v.initializer());
  return v;
}

// scatter_update's contract where duplicates may land in any order (a GPU's
// atomic path, varstate/scatter.h): every element of `got` equals that
// element of `start` where no index names its row, else that element of
// one of the updates naming the row (compared as bytes). `updates` is
// [indices.size()] + row shape. Empty when it holds, else the first
// element that breaks it.
inline std::string update_takes_a_duplicate(const Tensor& got, const Tensor& start,
                                            const Tensor& indices, const Tensor& updates) {
  const Tensor g = got.to_host(), s = start.to_host(), u = updates.to_host();
  const std::vector<int64_t> idx = indices.cast(DType::kInt64).to_vector<int64_t>();
  const int64_t rows = s.shape().dim(0);
  const int64_t width = rows == 0 ? 0 : s.num_elements() / rows;
  const size_t size = dtype_size(s.dtype());
  auto element = [&](const Tensor& t, int64_t i) {
    return static_cast<const std::byte*>(t.raw_data()) + static_cast<size_t>(i) * size;
  };
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const std::byte* have = element(g, r * width + c);
      bool named = false, found = false;
      for (size_t p = 0; p < idx.size() && !found; ++p) {
        if (idx[p] != r) continue;
        named = true;
        found = std::memcmp(have, element(u, static_cast<int64_t>(p) * width + c), size) == 0;
      }
      if (!named) found = std::memcmp(have, element(s, r * width + c), size) == 0;
      if (!found) {
        return "element [" + std::to_string(r) + "," + std::to_string(c) + "] is " +
               (named ? "no update of its row" : "not its start value");
      }
    }
  }
  return "";
}

// Byte-wise equality of two tensors' contents (for "left unchanged").
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  Tensor x = a.to_host(), y = b.to_host();
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

inline const DType kScatterDTypes[] = {
    DType::kFloat,  DType::kDouble, DType::kHalf,      DType::kBFloat16,   DType::kInt8,
    DType::kInt16,  DType::kInt32,  DType::kInt64,     DType::kUInt8,      DType::kUInt16,
    DType::kUInt32, DType::kUInt64, DType::kComplex64, DType::kComplex128, DType::kQInt8,
    DType::kQUInt8, DType::kQInt32};

}  // namespace varstate::testing
