#include "checkpoint/proto_convert_internal.h"

#include <algorithm>
#include <cstring>

#include "varstate/error.h"

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

namespace {

template <typename T, typename Field>
void copy_values(const Field& field, size_t count, TensorData& out, const std::string& where,
                 bool repeat_last) {
  if (repeat_last && static_cast<size_t>(field.size()) <= count) {
    out.bytes.assign(count * sizeof(T), std::byte{0});
    T* dst = reinterpret_cast<T*>(out.bytes.data());
    for (size_t i = 0; i < count && field.size() > 0; ++i) {
      dst[i] = static_cast<T>(field.Get(std::min(static_cast<int>(i), field.size() - 1)));
    }
    return;
  }
  if (static_cast<size_t>(field.size()) != count) {
    throw DataLossError(where + ": the record holds " + std::to_string(field.size()) +
                        " values, expected " + std::to_string(count));
  }
  out.bytes.resize(count * sizeof(T));
  T* dst = reinterpret_cast<T*>(out.bytes.data());
  for (size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(field.Get(static_cast<int>(i)));
}

template <typename T, typename Field>
void copy_complex(const Field& field, size_t count, TensorData& out, const std::string& where,
                  bool repeat_last) {
  if (repeat_last && field.size() % 2 == 0 && static_cast<size_t>(field.size()) <= 2 * count) {
    out.bytes.assign(count * sizeof(T), std::byte{0});
    auto* dst = reinterpret_cast<typename T::value_type*>(out.bytes.data());
    for (size_t i = 0; i < count && field.size() > 0; ++i) {
      const int at = std::min(static_cast<int>(2 * i), field.size() - 2);
      dst[2 * i] = field.Get(at);
      dst[2 * i + 1] = field.Get(at + 1);
    }
    return;
  }
  if (static_cast<size_t>(field.size()) != 2 * count) {
    throw DataLossError(where + ": the record holds " + std::to_string(field.size()) +
                        " complex components, expected " + std::to_string(2 * count));
  }
  out.bytes.resize(count * sizeof(T));
  auto* dst = reinterpret_cast<typename T::value_type*>(out.bytes.data());
  for (size_t i = 0; i < 2 * count; ++i) dst[i] = field.Get(static_cast<int>(i));
}

}  // namespace

void values_from_proto(const tf::TensorProto& proto, size_t count, TensorData& out,
                       const std::string& where, bool repeat_last) {
  const DType dtype = out.dtype;
  if (dtype == DType::kString) {
    if (repeat_last && static_cast<size_t>(proto.string_val_size()) < count) {
      out.strings.assign(proto.string_val().begin(), proto.string_val().end());
      out.strings.resize(count, out.strings.empty() ? std::string() : out.strings.back());
      return;
    }
    if (static_cast<size_t>(proto.string_val_size()) != count) {
      throw DataLossError(where + ": the record holds " + std::to_string(proto.string_val_size()) +
                          " strings, expected " + std::to_string(count));
    }
    out.strings.assign(proto.string_val().begin(), proto.string_val().end());
    return;
  }
  if (!proto.tensor_content().empty()) {
    if (proto.tensor_content().size() != count * dtype_size(dtype)) {
      throw DataLossError(where + ": tensor_content has " +
                          std::to_string(proto.tensor_content().size()) + " bytes, expected " +
                          std::to_string(count * dtype_size(dtype)));
    }
    out.bytes.resize(proto.tensor_content().size());
    std::memcpy(out.bytes.data(), proto.tensor_content().data(), out.bytes.size());
    return;
  }
  switch (dtype) {
    case DType::kFloat:
      return copy_values<float>(proto.float_val(), count, out, where, repeat_last);
    case DType::kDouble:
      return copy_values<double>(proto.double_val(), count, out, where, repeat_last);
    case DType::kInt32:
    case DType::kQInt32:
      return copy_values<int32_t>(proto.int_val(), count, out, where, repeat_last);
    case DType::kInt16:
    case DType::kQInt16:
      return copy_values<int16_t>(proto.int_val(), count, out, where, repeat_last);
    case DType::kInt8:
    case DType::kQInt8:
      return copy_values<int8_t>(proto.int_val(), count, out, where, repeat_last);
    case DType::kUInt8:
    case DType::kQUInt8:
      return copy_values<uint8_t>(proto.int_val(), count, out, where, repeat_last);
    case DType::kUInt16:
    case DType::kQUInt16:
      return copy_values<uint16_t>(proto.int_val(), count, out, where, repeat_last);
    case DType::kInt64:
      return copy_values<int64_t>(proto.int64_val(), count, out, where, repeat_last);
    case DType::kUInt32:
      return copy_values<uint32_t>(proto.uint32_val(), count, out, where, repeat_last);
    case DType::kUInt64:
      return copy_values<uint64_t>(proto.uint64_val(), count, out, where, repeat_last);
    case DType::kBool:
      return copy_values<uint8_t>(proto.bool_val(), count, out, where, repeat_last);
    case DType::kHalf:
    case DType::kBFloat16:
      return copy_values<uint16_t>(proto.half_val(), count, out, where, repeat_last);
    case DType::kComplex64:
      return copy_complex<complex64>(proto.scomplex_val(), count, out, where, repeat_last);
    case DType::kComplex128:
      return copy_complex<complex128>(proto.dcomplex_val(), count, out, where, repeat_last);
    default:
      throw UnimplementedError(where + ": unsupported dtype " + std::string(dtype_name(dtype)));
  }
}

}  // namespace varstate
