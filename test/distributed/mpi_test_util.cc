// The helpers of mpi_test_util.h.
#include "mpi_test_util.h"

#include <cstring>

namespace varstate::mpi_test {

bool same(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to_host(), y = b.to_host();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

Tensor i64(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v); }

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int finish(Cluster* cluster) {
  int failures = g_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (cluster) cluster->shutdown();
  if (g_rank == 0)
    std::printf("%s: %d failure(s) over all ranks\n", total ? "FAILED" : "passed", total);
  return total == 0 ? 0 : 1;
}

void corrupt_byte(const std::string& path, long offset) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  EXPECT(f != nullptr);
  if (!f) return;
  std::fseek(f, offset, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, offset, SEEK_SET);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
}

int temporaries(const std::string& dir) {
  int n = 0;
  for (const std::string& name : default_file_system()->list_dir(dir))
    n += name.find("_temp_") != std::string::npos;
  return n;
}
int indexes(const std::string& dir) {
  int n = 0;
  for (const std::string& name : default_file_system()->list_dir(dir))
    n += name.ends_with(".index") ? 1 : 0;
  return n;
}

Tensor w_value() {
  return make<float>({6, 4}, [](int64_t i) { return static_cast<float>(i) + 0.5f; });
}
Tensor emb_value() {
  return make<float>({10, 3}, [](int64_t i) { return static_cast<float>(100 * (i / 3) + i % 3); });
}

Model build_model(int emb_parts) {
  Variable w(Tensor::zeros(DType::kFloat, {6, 4}), {.name = "w"});
  PartitionedVariable emb = get_variable("emb", {.shape = {10, 3},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(emb_parts)});
  Variable step(Tensor(int64_t{0}), {.name = "global_step"});
  return {w, emb, step};
}

void set_model(Model& m, int64_t step) {
  m.w.assign(w_value());
  m.emb.assign(emb_value());
  m.step.assign(Tensor(step));
}

void check_model(const Model& m, int64_t step) {
  EXPECT(same(m.w.value(), w_value()));
  EXPECT(same(m.emb.as_tensor(), emb_value()));
  EXPECT(m.step.value().scalar<int64_t>() == step);
}

}  // namespace varstate::mpi_test
