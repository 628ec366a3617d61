// Slicing: reading a region of a tensor (Tensor.__getitem__) and writing a
// region in place (the `assign` of a sliced variable).
//
// A slice is a list of SliceSpecs with Python's (and tf.strided_slice's)
// semantics:
//   Slice::all()             x[:]
//   Slice::range(1, 3)       x[1:3]
//   Slice::range({}, 2)      x[:2]
//   Slice::range({}, {}, -1) x[::-1]
//   Slice::index(-1)         x[-1]   (an integer index drops the dimension)
//   Slice::ellipsis()        x[...]  (as many whole dimensions as needed)
//   Slice::newaxis()         x[tf.newaxis] (inserts a dimension of size 1)
// so that {Slice::ellipsis(), Slice::index(1)} is x[..., 1] and
// {Slice::all(), Slice::newaxis()} is x[:, tf.newaxis]. Each spec but an
// ellipsis or a newaxis consumes one dimension of the tensor; the ellipsis
// stands for the dimensions the others leave (possibly none), and without
// one the dimensions after the last spec are taken whole. Negative
// begin/end count from the end of the dimension; begin and end past the
// ends are clamped.
//
// Errors, checked before anything is read or written:
//  - ValueError: a step of 0; a negative-size range (begin past end in the
//    step's direction, e.g. x[2:1]); more than one ellipsis ("Multiple
//    ellipses in slice spec not allowed").
//  - InvalidArgumentError: an integer index out of range; more specs
//    consuming a dimension than the tensor has; a SliceSpec with more than
//    one of is_index, is_ellipsis and is_newaxis; (assign) a value whose
//    shape is not exactly the slice's (newaxis dimensions included, as 1).
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

// One entry of a slice: begin:end:step, an integer index, the ellipsis or
// a newaxis. Build it with Slice's functions; at most one flag is set.
struct SliceSpec {
  std::optional<int64_t> begin;  // default: start of the dim (end for step < 0)
  std::optional<int64_t> end;    // default: past the end (before the start for step < 0)
  std::optional<int64_t> step;   // default: 1
  // True: `begin` is an integer index that selects one element and drops
  // the dimension from the result.
  bool is_index = false;
  // True: `...`, the whole dimensions no other spec consumes.
  bool is_ellipsis = false;
  // True: tf.newaxis, a new dimension of size 1 in the result.
  bool is_newaxis = false;
};

struct Slice {
  static SliceSpec all() { return {}; }
  static SliceSpec range(std::optional<int64_t> begin, std::optional<int64_t> end,
                         std::optional<int64_t> step = std::nullopt) {
    return {begin, end, step, false};
  }
  static SliceSpec index(int64_t i) { return {i, std::nullopt, std::nullopt, true}; }
  static SliceSpec ellipsis() { return {.is_ellipsis = true}; }
  static SliceSpec newaxis() { return {.is_newaxis = true}; }
};

// The shape `specs` select from a tensor of `shape` (index dims dropped,
// newaxis dims of size 1 inserted).
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
