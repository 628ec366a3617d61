#include "varstate/gather.h"

#include <algorithm>
#include <span>
#include <string>

#include "kernels/cpu/gather.h"
#include "runtime/partitioned_variable_internal.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_validate.h"
#include "runtime/variable_access.h"
#include "runtime/variable_storage.h"
#include "varstate/device.h"
#include "varstate/device_manager.h"
#include "varstate/device_spec.h"
#include "varstate/dynamic_variable.h"
#include "varstate/error.h"
#include "varstate/placement.h"
#include "varstate/slice.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/gather.h"
#include "kernels/cuda/scatter.h"
#include "runtime/scatter_check_internal.h"
#endif

namespace varstate {
namespace internal {

std::vector<int64_t> host_indices(const Tensor& t) {
  if (t.dtype() == DType::kInt32) {
    std::vector<int32_t> v = t.to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return t.to_vector<int64_t>();
}

HostIndices::HostIndices(const Tensor& indices) {
  const auto n = static_cast<size_t>(indices.num_elements());
  if (indices.on_cpu() && indices.dtype() == DType::kInt64) {
    view_ = {indices.data<int64_t>(), n};
    return;
  }
  copy_.emplace(n);
  if (indices.on_cpu() && indices.dtype() == DType::kInt32) {
    std::copy_n(indices.data<int32_t>(), n, copy_->data());
  } else {
    const std::vector<int64_t> host = host_indices(indices);
    std::copy(host.begin(), host.end(), copy_->data());
  }
  view_ = {copy_->data(), n};
}

Tensor gather_rows(const Tensor& values, std::span<const int64_t> positions) {
  TensorShape shape =
      TensorShape({static_cast<int64_t>(positions.size())}).concatenate(values.shape().tail(1));
  Device& device = values.device();
  Tensor out(values.dtype(), shape, device);
  const int64_t rows = values.shape().dim(0);
  const int64_t row_elems = rows == 0 ? 0 : values.num_elements() / rows;
  if (positions.empty() || row_elems == 0) return out;
  if (values.dtype() == DType::kString) {
    const auto* src = static_cast<const std::string*>(values.raw_data());
    auto* dst = static_cast<std::string*>(out.raw_data());
    for (size_t i = 0; i < positions.size(); ++i) {
      std::copy_n(src + positions[i] * row_elems, row_elems,
                  dst + static_cast<int64_t>(i) * row_elems);
    }
    return out;
  }
  const int64_t row_bytes = row_elems * static_cast<int64_t>(dtype_size(values.dtype()));
  if (device.is_cpu()) {
    kernels::cpu::gather_rows<int64_t>(values.raw_data(), row_bytes, positions.data(),
                                       static_cast<int64_t>(positions.size()), out.raw_data());
    return out;
  }
#ifdef VARSTATE_HAVE_CUDA
  // The positions straight from the caller's span to the device (staged,
  // read before copy_bytes returns), no host tensor in between.
  Tensor dev_pos(DType::kInt64, {static_cast<int64_t>(positions.size())}, device);
  copy_bytes(device, dev_pos.raw_data(), DeviceManager::instance().cpu(), positions.data(),
             positions.size_bytes());
  DeviceGuard guard(device);
  kernels::cuda::gather_rows<int64_t>(values.raw_data(), row_bytes,
                                      static_cast<const int64_t*>(dev_pos.raw_data()),
                                      dev_pos.num_elements(), out.raw_data(), device.stream());
#endif
  return out;
}

}  // namespace internal

namespace {

std::string op_label(const GatherOptions& options) {
  return options.name.empty() ? std::string("gather") : options.name;
}

void check_index_dtype(const Tensor& indices, const std::string& who) {
  if (indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64) {
    throw TypeError(who + ": indices must be int32 or int64, got " +
                    std::string(dtype_name(indices.dtype())));
  }
}

// The indices as host int64 values (internal::HostIndices: read in place
// where they can be), each checked against [0, rows).
class CheckedIndices : public internal::HostIndices {
 public:
  CheckedIndices(const Tensor& indices, int64_t rows, const std::string& who)
      : HostIndices(typed(indices, who)) {
    // The scatters' check: a bad index named by its coordinates, as TensorFlow does.
    internal::check_index_values(view(), indices.shape(), rows, who);
  }
  size_t size() const { return view().size(); }

 private:
  static const Tensor& typed(const Tensor& indices, const std::string& who) {
    check_index_dtype(indices, who);
    return indices;
  }
};

void check_params_rank(const TensorShape& shape, const std::string& who) {
  if (shape.rank() < 1) {
    throw InvalidArgumentError(who + ": params must be at least 1-D, got shape " +
                               shape.to_string());
  }
}

// positions' rows of `params`, shaped indices.shape + params.shape[1:].
Tensor gather_checked(const Tensor& params, const TensorShape& index_shape,
                      std::span<const int64_t> positions) {
  return internal::gather_rows(params, positions)
      .reshaped(index_shape.concatenate(params.shape().tail(1)));
}

// Whether `params`' rows at `indices` can be gathered where both are: on
// one GPU, the indices never copied to the host.
bool gather_in_place(const Tensor& params, const Tensor& indices) {
  return !params.on_cpu() && &indices.device() == &params.device();
}

// The rows of `params` (on a GPU) at `indices` (int32 or int64, on that
// GPU), shaped indices.shape + params.shape[1:]: the bounds are checked on
// the device (kernels/cuda/scatter.h's protocol: past a bad index the gather
// writes nothing) and the check's record is the one thing read back, the
// error (as the host check words it) raised before returning.
Tensor gather_on_device(const Tensor& params, const Tensor& indices, const std::string& who) {
  Tensor out(params.dtype(), indices.shape().concatenate(params.shape().tail(1)), params.device());
#ifdef VARSTATE_HAVE_CUDA
  const int64_t n = indices.num_elements();
  if (n == 0) return out;
  const int64_t rows = params.shape().dim(0);
  const int64_t row_bytes =
      params.shape().tail(1).num_elements() * static_cast<int64_t>(dtype_size(params.dtype()));
  Device& device = params.device();
  const std::string error = internal::check_now(
      device,
      [&](kernels::cuda::IndexCheck* check) {
        DeviceGuard guard(device);
        cudaStream_t stream = device.stream();
        kernels::cuda::reset_index_check(check, stream);
        auto run = [&](const auto* idx) {
          kernels::cuda::validate_indices(idx, n, rows, check, stream);
          kernels::cuda::gather_rows(params.raw_data(), row_bytes, idx, n, out.raw_data(), stream,
                                     check);
        };
        if (indices.dtype() == DType::kInt32) {
          run(static_cast<const int32_t*>(indices.raw_data()));
        } else {
          run(static_cast<const int64_t*>(indices.raw_data()));
        }
      },
      who, indices.shape(), TensorShape{}, rows);
  if (!error.empty()) throw InvalidArgumentError(error);
#else
  (void)indices, (void)who;
#endif
  return out;
}

// The rows `local[k]` (host int64) of each part k, gathered by each kind
// of storage in one batch (for parts on other tasks, one exchange per
// owning task); an invalid tensor for the parts without rows.
std::vector<Tensor> gather_parts(const std::vector<Variable>& parts,
                                 const std::vector<Tensor>& local) {
  std::vector<Variable> handles = parts;
  std::vector<internal::StoragePart> batch;
  std::vector<size_t> which;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (local[k].num_elements() == 0) continue;
    batch.push_back({&internal::storage(parts[k]), &handles[k], local[k], Tensor()});
    which.push_back(k);
  }
  internal::for_each_kind(batch, [](std::vector<internal::StoragePart>& group) {
    group[0].storage->gather_parts(group);
  });
  std::vector<Tensor> out(parts.size());
  for (size_t j = 0; j < batch.size(); ++j) out[which[j]] = std::move(batch[j].values);
  return out;
}

}  // namespace

Tensor gather(const Tensor& params, const Tensor& indices, const GatherOptions& options) {
  const std::string who = op_label(options);
  check_params_rank(params.shape(), who);
  if (gather_in_place(params, indices)) {
    check_index_dtype(indices, who);
    return gather_on_device(params, indices, who);
  }
  const CheckedIndices idx(indices, params.shape().dim(0), who);
  return gather_checked(params, indices.shape(), idx.view());
}

Tensor gather(const Variable& params, const Tensor& indices, const GatherOptions& options) {
  const std::string who = op_label(options) + " on " + quoted(params.op_name());
  if (std::optional<DynamicVariable> dynamic = DynamicVariable::from_variable(params)) {
    // Indices are keys; absent ones are inserted, as a training lookup.
    return dynamic->gather(indices);
  }
  check_params_rank(params.shape(), who);
  if (!indices.on_cpu() && internal::storage(params).updates_in_place()) {
    check_index_dtype(indices, who);
    // The live value, as the storage's own gather reads it.
    const Tensor value = params.value();
    if (gather_in_place(value, indices)) return gather_on_device(value, indices, who);
  }
  const CheckedIndices idx(indices, params.shape().dim(0), who);
  return internal::storage(params)
      .gather(params, std::vector<int64_t>(idx.view().begin(), idx.view().end()))
      .reshaped(indices.shape().concatenate(params.shape().tail(1)));
}

Tensor gather(const PartitionedVariable& params, const Tensor& indices,
              const GatherOptions& options) {
  const std::string who = op_label(options) + " on " + quoted(params.name());
  check_params_rank(params.shape(), who);
  Device& target = options.device
                       ? resolve_device(DeviceSpec::parse(*options.device), params.dtype(), who)
                       : place({params.name() + "/Gather", "GatherV2"}, params.dtype());
  const CheckedIndices idx(indices, params.shape().dim(0), who);
  const std::vector<Variable>& parts = params.variables();
  internal::check_initialized(parts);
  if (params.axis() != 0) {
    // Rows cut across every part: read the whole table on the target device.
    return gather_checked(params.as_tensor(target), indices.shape(), idx.view());
  }
  const std::vector<int64_t>& offsets = params.offsets();
  const size_t num_parts = parts.size();
  const TensorShape row_shape = params.shape().tail(1);
  const int64_t n = static_cast<int64_t>(idx.size());
  const bool all_on_cpu = std::all_of(parts.begin(), parts.end(), [](const Variable& v) {
    return v.device().is_cpu() && internal::storage(v).updates_in_place();
  });
  if (target.is_cpu() && all_on_cpu && params.dtype() != DType::kString) {
    // Rows copied straight from the parts' buffers.
    std::vector<Tensor> values;
    std::vector<const void*> bases;
    for (const Variable& part : parts) {
      values.push_back(part.value());
      bases.push_back(values.back().raw_data());
    }
    Tensor out(params.dtype(), indices.shape().concatenate(row_shape), target);
    const int64_t row_bytes =
        row_shape.num_elements() * static_cast<int64_t>(dtype_size(params.dtype()));
    kernels::cpu::gather_rows_parts<int64_t>(bases.data(), offsets.data(),
                                             static_cast<int>(num_parts), row_bytes,
                                             idx.view().data(), n, out.raw_data());
    return out;
  }
  // Route each index to the part holding its row; each part gathers its own
  // rows on its device, and only those rows travel to the target.
  const internal::PartRoutes routes(offsets, idx.view());
  const std::vector<Tensor> part_rows = gather_parts(parts, routes.local());
  // The parts' rows one after another (part order) on the target, then put
  // back in index order by one more gather.
  Tensor by_part(params.dtype(), TensorShape({n}).concatenate(row_shape), target);
  std::vector<int64_t> order(idx.size());
  int64_t next = 0;
  for (size_t k = 0; k < num_parts; ++k) {
    const Tensor& local = routes.local()[k];
    const int64_t m = local.num_elements();
    if (m == 0) continue;
    const Tensor rows = part_rows[k].on(target);
    if (m == n) return rows.reshaped(indices.shape().concatenate(row_shape));  // one part
    strided_slice_assign(by_part, {Slice::range(next, next + m)}, rows, params.name());
    const std::span<const int64_t> positions = routes.positions(k);
    for (int64_t j = 0; j < m; ++j) order[static_cast<size_t>(positions[j])] = next + j;
    next += m;
  }
  return gather_checked(by_part, indices.shape(), order);
}

std::vector<GradientAndVariable> gather_gradients(const PartitionedVariable& params,
                                                  const Tensor& indices, const Tensor& grads,
                                                  const GatherOptions& options) {
  const std::string who = (options.name.empty() ? std::string("gather_gradients") : options.name) +
                          " on " + quoted(params.name());
  check_params_rank(params.shape(), who);
  const std::vector<Variable>& parts = params.variables();
  if (parts.size() > 1 && params.axis() != 0) {
    throw InvalidArgumentError(who + ": the table must be partitioned along axis 0, not axis " +
                               std::to_string(params.axis()));
  }
  if (!grads.valid() || !indices.valid()) {
    throw InvalidArgumentError(who + ": empty tensor handle for " +
                               (grads.valid() ? "indices" : "grads"));
  }
  const TensorShape row_shape = params.shape().tail(1);
  const TensorShape expected = indices.shape().concatenate(row_shape);
  if (grads.shape() != expected) {
    throw InvalidArgumentError(who + ": grads must have shape " + expected.to_string() +
                               " (the indices' shape, then a row's), got " +
                               grads.shape().to_string());
  }
  if (grads.dtype() != params.dtype()) {
    throw TypeError(who + ": grads must be " + std::string(dtype_name(params.dtype())) +
                    " as the table, got " + std::string(dtype_name(grads.dtype())));
  }
  const CheckedIndices idx(indices, params.shape().dim(0), who);
  const int64_t n = static_cast<int64_t>(idx.size());
  const Tensor rows = grads.reshaped(TensorShape({n}).concatenate(row_shape));
  const internal::PartRoutes routes(params.offsets(), idx.view());
  std::vector<GradientAndVariable> result;
  result.reserve(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    const Variable& part = parts[k];
    const std::span<const int64_t> positions = routes.positions(k);
    Tensor values = static_cast<int64_t>(positions.size()) == n
                        ? rows  // every row is in this part: no copy
                        : internal::gather_rows(rows, positions);
    values = values.on(part.device());
    result.push_back(
        {IndexedSlices(values, routes.local()[k], Tensor::from_vector(part.shape().dims())), part});
  }
  return result;
}

}  // namespace varstate
