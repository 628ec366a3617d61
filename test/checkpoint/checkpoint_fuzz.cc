// libFuzzer target for what a program reads from outside beyond one bundle
// (bundle_fuzz covers the index + one data shard and V1 files):
//
//   mode 0  a multi-shard V2 bundle, read with BundleReader (list, read,
//           read_into) and restored by Saver::restore into a fixed model
//           (whole, partitioned and string variables; reshape and
//           restore_sequentially from the flags). A restore that throws
//           must leave every variable untouched (all-or-nothing); one that
//           succeeds must leave each variable with its own shape.
//   mode 1  the "checkpoint" state file (get_checkpoint_state,
//           latest_checkpoint).
//   mode 2  a ".meta" file (import_meta_graph, binary or text).
//
// Input layout: byte 0 = mode (mod 3), byte 1 = flags. Mode 0: bits 0-1 of
// the flags + 1 = number of data shards n, bit 4 reshape, bit 5
// restore_sequentially; then n little-endian uint16 lengths (the index, then
// shards 0..n-2) each followed by its bytes, and the rest is shard n-1.
// Modes 1 and 2: the rest is the file (bit 0 of the flags: clear_devices).
// Every failure must be a varstate::Error -- never a crash, a sanitizer
// report, an unbounded allocation or a partial restore.
//
// make_checkpoint_fuzz_corpus DIR (this file with VARSTATE_FUZZ_CORPUS_MAIN)
// writes valid inputs for each mode (a real sharded save, its state file and
// meta graph, binary and text, of the model below) as seeds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/tensor_bundle.h"
#include "varstate/checkpoint_state.h"
#include "varstate/error.h"
#include "varstate/logging.h"
#include "varstate/meta_graph.h"
#include "varstate/placement.h"
#include "varstate/saver.h"
#include "varstate/variables.h"

namespace varstate::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string templ = (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                        std::string("/checkpoint_fuzz_XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    return templ;
  }();
  return dir;
}

inline void write(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The model restored into: one variable per kind of restore path, on two
// "devices" so that a sharded save has two data shards.
struct Model {
  Graph graph;
  std::vector<Variable> vars;
  Model() {
    auto guard = graph.as_default();
    {
      DeviceScope d("/job:ps/task:0");
      vars.emplace_back(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, TensorShape{2, 3}),
                        VariableOptions{.name = "a"});
      vars.emplace_back(Tensor::from_vector<std::string>({"x", "yz"}, TensorShape{2}),
                        VariableOptions{.name = "s"});
      vars.emplace_back(
          Tensor::from_vector<int64_t>({7, 8, 9, 10}, TensorShape{2, 2}),
          VariableOptions{.name = "p/part_0",
                          .save_slice_info = SaveSliceInfo{"p", {4, 2}, {0, 0}, {2, 2}}});
    }
    {
      DeviceScope d("/job:ps/task:1");
      vars.emplace_back(
          Tensor::from_vector<int64_t>({11, 12, 13, 14}, TensorShape{2, 2}),
          VariableOptions{.name = "p/part_1",
                          .save_slice_info = SaveSliceInfo{"p", {4, 2}, {2, 0}, {2, 2}}});
      vars.emplace_back(Tensor::from_vector<double>({0.5, -1.5, 2.25}, TensorShape{3}),
                        VariableOptions{.name = "b"});
    }
    Session sess;
    sess.run(global_variables_initializer());
  }
};

inline std::string bytes_of(const Variable& v) {
  Tensor h = v.value().to_host();
  if (h.dtype() == DType::kString) {
    std::string out;
    for (int64_t i = 0; i < h.num_elements(); ++i) out += h.data<std::string>()[i] + '\0';
    return out;
  }
  return std::string(static_cast<const char*>(h.raw_data()), h.nbytes());
}

inline void fuzz_bundle(const uint8_t* data, size_t size, unsigned flags) {
  static Model* model = new Model;  // reused: restores are all-or-nothing, values are compared
  const int n = 1 + static_cast<int>(flags & 3);
  const std::string prefix = scratch_dir() + "/ckpt";
  unlink(bundle_index_filename(prefix).c_str());
  for (int m = 1; m <= 4; ++m) {
    for (int k = 0; k < m; ++k) unlink(bundle_data_filename(prefix, k, m).c_str());
  }
  std::vector<std::string> paths{bundle_index_filename(prefix)};
  for (int k = 0; k < n; ++k) paths.push_back(bundle_data_filename(prefix, k, n));
  for (size_t f = 0; f < paths.size(); ++f) {
    size_t len = size;
    if (f + 1 < paths.size()) {
      if (size < 2) return;
      len = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
      data += 2;
      size -= 2;
    }
    write(paths[f], data, len);
    data += len;
    size -= len;
  }

  try {
    BundleReader reader(prefix);
    for (const TensorInfo& info : reader.list()) {
      try {
        reader.read(info.name);
        const std::optional<TensorInfo> found = reader.find(info.name);
        if (!found || found->dtype == DType::kString || !found->slices.empty()) continue;
        const int64_t count = num_elements(found->shape);
        if (count < 0 || count > (int64_t{1} << 20)) continue;
        std::vector<std::byte> dst(static_cast<size_t>(count) * dtype_size(found->dtype));
        reader.read_into(info.name, dst);
        // One byte short must be refused, never overrun.
        if (!dst.empty()) {
          bool threw = false;
          try {
            reader.read_into(info.name, std::span<std::byte>(dst.data(), dst.size() - 1));
          } catch (const Error&) {
            threw = true;
          }
          if (!threw) std::abort();
        }
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }

  std::vector<std::string> before;
  for (const Variable& v : model->vars) before.push_back(bytes_of(v));
  Session sess;
  bool restored = false;
  try {
    Saver saver({.var_list = model->vars,
                 .reshape = (flags & 0x10) != 0,
                 .restore_sequentially = (flags & 0x20) != 0,
                 .graph = &model->graph});
    saver.restore(sess, prefix);
    restored = true;
  } catch (const Error&) {
  }
  for (size_t i = 0; i < model->vars.size(); ++i) {
    const Variable& v = model->vars[i];
    if (!restored && bytes_of(v) != before[i]) std::abort();  // a partial restore
    if (v.value().shape() != v.shape()) std::abort();
  }
}

inline void fuzz_state_file(const uint8_t* data, size_t size) {
  const std::string dir = scratch_dir() + "/state";
  static const bool made = [&] { return std::system(("mkdir -p " + dir).c_str()) == 0; }();
  if (!made) std::abort();
  write(dir + "/checkpoint", data, size);
  try {
    if (auto state = get_checkpoint_state(dir)) {
      for (const std::string& p : state->all_model_checkpoint_paths) checkpoint_exists(p);
      checkpoint_state_to_text(*state);
    }
    latest_checkpoint(dir);
  } catch (const Error&) {
  }
}

inline void fuzz_meta_graph(const uint8_t* data, size_t size, unsigned flags) {
  const std::string path = scratch_dir() + "/model.meta";
  write(path, data, size);
  try {
    Graph graph;
    std::optional<Saver> saver =
        import_meta_graph(path, {.clear_devices = (flags & 1) != 0, .graph = &graph});
    if (saver) saver->as_saver_def();
  } catch (const Error&) {
  }
}

}  // namespace varstate::fuzz

#ifdef VARSTATE_FUZZ_CORPUS_MAIN
// Writes the seed inputs into argv[1].
int main(int argc, char** argv) {
  using namespace varstate;
  using namespace varstate::fuzz;
  if (argc != 2) return 2;
  const std::string out = argv[1];
  Model model;
  Session sess;
  const std::string dir = scratch_dir() + "/seed";
  if (std::system(("mkdir -p " + dir + " '" + out + "'").c_str()) != 0) return 1;
  Saver saver({.var_list = model.vars, .sharded = true, .graph = &model.graph});
  const std::string prefix = *saver.save(sess, dir + "/m", {.global_step = 3}).path();
  // Mode 0: the index and the two data shards.
  const std::string index = read(bundle_index_filename(prefix));
  const std::string shard0 = read(bundle_data_filename(prefix, 0, 2));
  const std::string shard1 = read(bundle_data_filename(prefix, 1, 2));
  if (index.size() > 0xffff || shard0.size() > 0xffff) return 1;
  std::string bundle{'\0', '\1'};
  for (const std::string* part : {&index, &shard0}) {
    bundle += static_cast<char>(part->size() & 0xff);
    bundle += static_cast<char>(part->size() >> 8);
    bundle += *part;
  }
  bundle += shard1;
  std::string state{'\1', '\0'};
  state += read(dir + "/checkpoint");
  std::string meta{'\2', '\0'};
  meta += read(prefix + ".meta");
  saver.export_meta_graph(dir + "/text.meta", std::nullopt, /*as_text=*/true);
  std::string meta_text{'\2', '\1'};
  meta_text += read(dir + "/text.meta");
  const std::pair<const char*, const std::string*> seeds[] = {{"bundle_sharded", &bundle},
                                                              {"state_file", &state},
                                                              {"meta_graph", &meta},
                                                              {"meta_graph_text", &meta_text}};
  for (const auto& [name, bytes] : seeds) {
    write(out + "/" + name, reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  }
  return std::system(("rm -rf '" + scratch_dir() + "'").c_str()) == 0 ? 0 : 1;
}
#else
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  varstate::set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const unsigned mode = data[0] % 3;
  const unsigned flags = data[1];
  data += 2;
  size -= 2;
  switch (mode) {
    case 0:
      varstate::fuzz::fuzz_bundle(data, size, flags);
      break;
    case 1:
      varstate::fuzz::fuzz_state_file(data, size);
      break;
    default:
      varstate::fuzz::fuzz_meta_graph(data, size, flags);
      break;
  }
  return 0;
}
#endif
