#include "checkpoint/v1_writer.h"

#include <cstring>

#include "checkpoint/file_system.h"
#include "checkpoint/ordered_code_internal.h"
#include "checkpoint/proto_convert_internal.h"
#include "checkpoint/table_internal.h"
#include "proto/saved_tensor_slices.pb.h"
#include "varstate/error.h"

namespace varstate {
namespace {

template <typename T, typename Field>
void add_values(const TensorView& t, Field* field) {
  const size_t n = t.bytes.size() / sizeof(T);
  field->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
    field->Add(v);
  }
}

template <typename C, typename Field>
void add_complex(const TensorView& t, Field* field) {
  const size_t n = t.bytes.size() / sizeof(C);
  field->Reserve(static_cast<int>(2 * n));
  for (size_t i = 0; i < n; ++i) {
    C v;
    std::memcpy(&v, t.bytes.data() + i * sizeof(C), sizeof(C));
    field->Add(v.real());
    field->Add(v.imag());
  }
}

// The values in the typed field TensorFlow's V1 reader reads for the dtype.
void fill_proto(const TensorView& t, tf::TensorProto* proto) {
  switch (t.dtype) {
    case DType::kFloat:
      return add_values<float>(t, proto->mutable_float_val());
    case DType::kDouble:
      return add_values<double>(t, proto->mutable_double_val());
    case DType::kInt32:
    case DType::kQInt32:
      return add_values<int32_t>(t, proto->mutable_int_val());
    case DType::kInt16:
    case DType::kQInt16:
      return add_values<int16_t>(t, proto->mutable_int_val());
    case DType::kInt8:
    case DType::kQInt8:
      return add_values<int8_t>(t, proto->mutable_int_val());
    case DType::kUInt8:
    case DType::kQUInt8:
      return add_values<uint8_t>(t, proto->mutable_int_val());
    case DType::kUInt16:
    case DType::kQUInt16:
      return add_values<uint16_t>(t, proto->mutable_int_val());
    case DType::kInt64:
      return add_values<int64_t>(t, proto->mutable_int64_val());
    case DType::kBool:
      return add_values<uint8_t>(t, proto->mutable_bool_val());
    case DType::kHalf:
      return add_values<uint16_t>(t, proto->mutable_half_val());
    case DType::kComplex64:
      return add_complex<complex64>(t, proto->mutable_scomplex_val());
    case DType::kComplex128:
      return add_complex<complex128>(t, proto->mutable_dcomplex_val());
    case DType::kString:
      for (const std::string& s : t.strings) proto->add_string_val(s);
      return;
    default:
      throw InternalError("V1Writer: dtype " + std::string(dtype_name(t.dtype)) +
                          " passed the check");
  }
}

// TensorFlow rejects V1 records above 2 GB (a protobuf message limit).
constexpr uint64_t kMaxRecordBytes = (uint64_t{1} << 31) - 1;

// Bytes a value takes at most in a TensorProto's packed field (varints: 10).
uint64_t max_bytes_per_element(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return 4;
    case DType::kDouble:
      return 8;
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
    case DType::kBool:
      return 1;
    default:
      return 10;
  }
}

}  // namespace

bool v1_supports_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
    case DType::kDouble:
    case DType::kInt32:
    case DType::kInt16:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kInt64:
    case DType::kBool:
    case DType::kHalf:
    case DType::kComplex64:
    case DType::kComplex128:
    case DType::kString:
    case DType::kQInt8:
    case DType::kQUInt8:
    case DType::kQInt16:
    case DType::kQUInt16:
    case DType::kQInt32:
      return true;
    default:
      return false;
  }
}

V1Writer::V1Writer(std::string path, FileSystem* fs)
    : path_(std::move(path)), fs_(fs ? fs : default_file_system()) {}

void V1Writer::add(std::string_view name, const TensorView& tensor) {
  add_slice(name, tensor.shape, TensorSlice::full(static_cast<int>(tensor.shape.size())), tensor);
}

void V1Writer::add_slice(std::string_view name, const std::vector<int64_t>& full_shape,
                         const TensorSlice& slice, const TensorView& tensor) {
  const std::string what = "writing " + quoted(name) + " (slice " + quoted(slice.to_string()) +
                           ") to V1 checkpoint " + quoted(path_);
  if (finished_) throw FailedPreconditionError(what + ": the writer has finished");
  if (name.empty()) throw InvalidArgumentError(what + ": empty tensor name");
  if (!v1_supports_dtype(tensor.dtype)) {
    throw UnimplementedError(what + ": TensorFlow's V1 format cannot hold dtype " +
                             std::string(dtype_name(tensor.dtype)) + " (write V2)");
  }
  validate_tensor_view(tensor, what);
  check_slice_to_write(slice, full_shape, tensor.shape, what);
  const uint64_t bound =
      64 + name.size() +
      static_cast<uint64_t>(num_elements(tensor.shape)) * max_bytes_per_element(tensor.dtype);
  uint64_t string_bytes = 0;
  for (const std::string& s : tensor.strings) string_bytes += s.size() + 10;
  if (bound + string_bytes > kMaxRecordBytes) {
    throw InvalidArgumentError(what +
                               ": Tensor slice is too large to serialize (conservative "
                               "estimate: " +
                               std::to_string(bound + string_bytes) + " bytes)");
  }
  const std::string key = encode_tensor_name_slice(name, slice);
  if (records_.count(key)) throw InvalidArgumentError(what + ": this slice was already added");
  auto it = meta_.find(std::string(name));
  if (it != meta_.end() && (it->second.dtype != tensor.dtype || it->second.shape != full_shape)) {
    throw InvalidArgumentError(what + ": dtype " + std::string(dtype_name(tensor.dtype)) +
                               " and shape " + shape_string(full_shape) +
                               " differ from an earlier "
                               "slice's (" +
                               std::string(dtype_name(it->second.dtype)) + ", " +
                               shape_string(it->second.shape) + ")");
  }
  for (const TensorSlice& other :
       it == meta_.end() ? std::vector<TensorSlice>{} : it->second.slices) {
    if (other.intersect(slice, full_shape)) {
      throw InvalidArgumentError(what + ": overlaps the slice " + quoted(other.to_string()) +
                                 " added before");
    }
  }

  tf::SavedTensorSlices record;
  tf::SavedSlice* saved = record.mutable_data();
  saved->set_name(std::string(name));
  slice_to_proto(slice, saved->mutable_slice());
  fill_proto(tensor, saved->mutable_data());
  std::string bytes;
  if (!record.SerializeToString(&bytes))
    throw InternalError(what + ": cannot serialize the record");

  Meta& meta = meta_[std::string(name)];
  meta.dtype = tensor.dtype;
  meta.shape = full_shape;
  meta.slices.push_back(slice);
  records_.emplace(key, std::move(bytes));
}

void V1Writer::finish() {
  if (finished_)
    throw FailedPreconditionError("V1 checkpoint " + quoted(path_) + ": finish() called twice");
  tf::SavedTensorSlices header;
  tf::SavedTensorSliceMeta* meta = header.mutable_meta();
  meta->mutable_versions()->set_producer(kCheckpointVersion);
  for (const auto& [name, m] : meta_) {
    tf::SavedSliceMeta* t = meta->add_tensor();
    t->set_name(name);
    shape_to_proto(m.shape, t->mutable_shape());
    t->set_type(static_cast<tf::DataType>(m.dtype));
    for (const TensorSlice& s : m.slices) slice_to_proto(s, t->add_slice());
  }
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(records_.size() + 1);
  entries.emplace_back("", header.SerializeAsString());
  for (auto& [key, value] : records_) entries.emplace_back(key, std::move(value));
  records_.clear();
  finished_ = true;
  write_table_atomically(*fs_, path_, entries);
}

}  // namespace varstate
