// Conversions between the generated TensorFlow protos and the checkpoint
// module's plain types. Internal: includes generated .pb.h headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/tensor.pb.h"
#include "proto/tensor_shape.pb.h"
#include "proto/tensor_slice.pb.h"
#include "proto/versions.pb.h"
#include "varstate/tensor_data.h"
#include "varstate/tensor_slice.h"

namespace varstate {

// Throws DataLossError("<what>: Invalid tensor shape ...") for an unknown
// rank or a negative dimension.
std::vector<int64_t> shape_from_proto(const tf::TensorShapeProto& proto, const std::string& what);
void shape_to_proto(const std::vector<int64_t>& shape, tf::TensorShapeProto* proto);

// Throws DataLossError for a negative start or length.
TensorSlice slice_from_proto(const tf::TensorSliceProto& proto, const std::string& what);
// TensorFlow's form: an empty extent for a full dimension, else start (0
// omitted on the wire) and an explicit length.
void slice_to_proto(const TensorSlice& slice, tf::TensorSliceProto* proto);

// The `count` values of a TensorProto of dtype out.dtype into `out`: its
// tensor_content, else the dtype's typed field (string_val, float_val, ...),
// which must hold exactly `count` values -- or, with `repeat_last`, at most
// `count`, the last one repeated (none: zeros), as TensorFlow reads a Const.
// Throws DataLossError naming `where`, UnimplementedError for a dtype that
// has no typed field.
void values_from_proto(const tf::TensorProto& proto, size_t count, TensorData& out,
                       const std::string& where, bool repeat_last = false);

// The checkpoint version rule shared by V2 headers and V1 metadata: we
// produce version 1 and accept producer >= 0, min_consumer <= 1, 1 not in
// bad_consumers. Throws InvalidArgumentError naming `what`.
void check_checkpoint_version(const tf::VersionDef& version, const std::string& what);

inline constexpr int kCheckpointVersion = 1;
inline constexpr int kCheckpointMinProducer = 0;

}  // namespace varstate
