#include "varstate/checkpoint/proto_convert_internal.h"

#include "varstate/base/error.h"

namespace varstate {

std::vector<int64_t> shape_from_proto(const tf::TensorShapeProto& proto, const std::string& what) {
  if (proto.unknown_rank()) throw DataLossError(what + ": Invalid tensor shape: unknown rank");
  std::vector<int64_t> shape;
  shape.reserve(static_cast<size_t>(proto.dim_size()));
  for (const auto& dim : proto.dim()) {
    if (dim.size() < 0) {
      throw DataLossError(what + ": Invalid tensor shape: dimension " +
                          std::to_string(shape.size()) + " is " + std::to_string(dim.size()));
    }
    shape.push_back(dim.size());
  }
  try {
    num_elements(shape);
  } catch (const InvalidArgumentError& e) {
    throw DataLossError(what + ": Invalid tensor shape: " + e.what());
  }
  return shape;
}

void shape_to_proto(const std::vector<int64_t>& shape, tf::TensorShapeProto* proto) {
  proto->Clear();
  for (int64_t d : shape) proto->add_dim()->set_size(d);
}

TensorSlice slice_from_proto(const tf::TensorSliceProto& proto, const std::string& what) {
  std::vector<TensorSlice::Extent> extents;
  for (const auto& e : proto.extent()) {
    if (e.has_length_case() == tf::TensorSliceProto::Extent::kLength) {
      if (e.start() < 0 || e.length() < 0) {
        throw DataLossError(what + ": invalid slice extent (start " + std::to_string(e.start()) +
                            ", length " + std::to_string(e.length()) + ")");
      }
      extents.push_back(TensorSlice::Extent{e.start(), e.length()});
    } else {
      extents.push_back(TensorSlice::Extent{});
    }
  }
  return TensorSlice(std::move(extents));
}

void slice_to_proto(const TensorSlice& slice, tf::TensorSliceProto* proto) {
  proto->Clear();
  for (const TensorSlice::Extent& e : slice.extents()) {
    auto* out = proto->add_extent();
    if (e.length != TensorSlice::kFullExtent) {
      out->set_start(e.start);
      out->set_length(e.length);
    }
  }
}

void check_checkpoint_version(const tf::VersionDef& version, const std::string& what) {
  if (version.producer() < kCheckpointMinProducer) {
    throw InvalidArgumentError(what + ": checkpoint producer version " +
                               std::to_string(version.producer()) + " is below the minimum " +
                               std::to_string(kCheckpointMinProducer));
  }
  if (version.min_consumer() > kCheckpointVersion) {
    throw InvalidArgumentError(what + ": checkpoint needs consumer version " +
                               std::to_string(version.min_consumer()) + " but this reader is " +
                               std::to_string(kCheckpointVersion) +
                               " (written by a newer TensorFlow?)");
  }
  for (int bad : version.bad_consumers()) {
    if (bad == kCheckpointVersion) {
      throw InvalidArgumentError(what + ": checkpoint disallows consumer version " +
                                 std::to_string(kCheckpointVersion));
    }
  }
}

}  // namespace varstate
