// Slicing: reading a region of a tensor (Tensor.__getitem__) and writing a
// region in place (the `assign` of a sliced variable).
//
// A slice is one SliceSpec per dimension, with Python's semantics:
//   Slice::all()             x[:]
//   Slice::range(1, 3)       x[1:3]
//   Slice::range({}, 2)      x[:2]
//   Slice::range({}, {}, -1) x[::-1]
//   Slice::index(-1)         x[-1]   (an integer index drops the dimension)
// Negative begin/end count
// from the end of the dimension; begin and end past the ends are clamped.
// Dimensions after the last spec are taken whole. There is no newaxis and no
// ellipsis.
//
// Errors, checked before anything is read or written:
//  - ValueError: a step of 0; a negative-size range (begin past end in the
//    step's direction, e.g. x[2:1]).
//  - InvalidArgumentError: an integer index out of range; more specs than
//    dimensions; (assign) a value whose shape is not exactly the slice's.
//  - TypeError: (assign) a value of another dtype (weak literals convert).
//
// Both run on the tensor's device (a GPU copy is enqueued on its stream).
// Thread-safety: concurrent reads are safe; a slice assign races with other
// writers of the same tensor, as any in-place update does.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "varstate/tensor.h"

namespace varstate {

// One dimension of a slice: begin:end:step, or an integer index.
struct SliceSpec {
  std::optional<int64_t> begin;  // default: start of the dim (end for step < 0)
  std::optional<int64_t> end;    // default: past the end (before the start for step < 0)
  std::optional<int64_t> step;   // default: 1
  // True: `begin` is an integer index that selects one element and drops
  // the dimension from the result.
  bool is_index = false;
};

struct Slice {
  static SliceSpec all() { return {}; }
  static SliceSpec range(std::optional<int64_t> begin, std::optional<int64_t> end,
                         std::optional<int64_t> step = std::nullopt) {
    return {begin, end, step, false};
  }
  static SliceSpec index(int64_t i) { return {i, std::nullopt, std::nullopt, true}; }
};

// The shape `specs` select from a tensor of `shape` (index dims dropped).
// Throws as described above.
TensorShape slice_shape(const TensorShape& shape, const std::vector<SliceSpec>& specs);

// A new tensor holding the selected region of `t`, on t's device.
Tensor strided_slice(const Tensor& t, const std::vector<SliceSpec>& specs);

// Writes `value` into the selected region of `target`'s buffer (every
// handle sharing it sees the change), on the target's device; a value on
// another device is copied there first. No broadcasting: value's shape must
// equal slice_shape(target.shape(), specs). `name` names the target in
// error messages. A call that throws has written nothing.
void strided_slice_assign(Tensor& target, const std::vector<SliceSpec>& specs, const Tensor& value,
                          std::string_view name = {});

}  // namespace varstate
