// `varstate demo`: the main job. Builds a small model's variables the way a
// TensorFlow 1 training program does — name scopes, device placement,
// collections, a global step — initializes them, runs training-style
// updates and reports what happened on which device.
#include <stdlib.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "checkpoint/checkpoint_state.h"
#include "checkpoint/saver.h"
#include "device/device_manager.h"
#include "device/placement.h"
#include "runtime/initializers.h"
#include "runtime/variables.h"
#include "tools/commands.h"

namespace varstate::cli {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "varstate-demo-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw InternalError("cannot create a temporary folder from " + pattern);
  }
  return pattern;
}

int demo(int steps, const std::string& ckpt_dir) {
  if (!ckpt_dir.empty()) ensure_writable_dir("--checkpoint_dir", ckpt_dir);
  auto& dm = DeviceManager::instance();
  std::printf("varstate demo: %d GPU(s); devices: %s\n", dm.num_gpus(), dm.device_list().c_str());
  reset_default_graph();

  // Parameters on the first GPU (CPU without one); the step counter and a
  // moving average on the CPU, as a parameter-server layout would do.
  const int64_t hidden = 1024, inputs = 4096;
  std::optional<Variable> weights, bias;
  {
    DeviceScope gpu_scope("/device:GPU:0");
    NameScope scope("dense");
    // Seeded initializers run on the variable's device when the initializer
    // op runs: same values on CPU and GPU, and across runs.
    set_random_seed(2026);
    TensorShape kernel_shape{inputs, hidden};
    weights.emplace(bind(glorot_uniform_initializer({.seed = 1}), kernel_shape, DType::kFloat),
                    VariableOptions{.name = "kernel", .dtype = DType::kFloat, .expected_shape = kernel_shape});
    bias.emplace(bind(zeros_initializer(), TensorShape{hidden}, DType::kFloat),
                 VariableOptions{.name = "bias", .dtype = DType::kFloat, .expected_shape = TensorShape{hidden}});
  }
  DeviceScope cpu_scope("/cpu:0");
  Variable global_step(Tensor(int64_t{0}), {.trainable = false, .name = "global_step"});
  Variable average(Tensor::zeros(DType::kFloat, {hidden}),
                   {.trainable = false,
                    .collections = std::vector<std::string>{GraphKeys::GLOBAL_VARIABLES,
                                                            GraphKeys::MOVING_AVERAGE_VARIABLES},
                    .caching_device = "/cpu:0",
                    .name = "bias_average"});

  Session sess;
  auto t0 = std::chrono::steady_clock::now();
  sess.run(global_variables_initializer());
  std::printf("initialized %zu variables in %.2f ms; uninitialized left: %lld\n",
              global_variables().size(), ms_since(t0),
              static_cast<long long>(report_uninitialized_variables().num_elements()));
  for (const Variable& v : global_variables()) {
    std::printf("  %-22s %-12s %-9s on %s%s\n", v.name().c_str(), v.shape().to_string().c_str(),
                std::string(dtype_name(v.dtype())).c_str(), v.device().name().c_str(),
                v.trainable() ? " (trainable)" : "");
  }

  Tensor w_initial = weights->read_value().to_host();
  const float limit = std::sqrt(6.f / static_cast<float>(inputs + hidden));
  const float w0 = w_initial.data<float>()[0];
  std::printf("dense/kernel ~ glorot_uniform(limit %.5f): kernel[0,0] = %.5f\n", limit, w0);

  // "Training": a constant gradient step on every trainable variable, the
  // step counter, and an average of the bias read through its cache.
  Tensor grad_w = Tensor::filled(DType::kFloat, {inputs, hidden}, Tensor(0.001f), weights->device());
  Tensor grad_b = Tensor::filled(DType::kFloat, {hidden}, Tensor(0.01f), bias->device());
  t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    weights->assign_sub(grad_w);
    bias->assign_add(grad_b, /*use_locking=*/true);
    global_step.count_up_to(1 << 30);
    if (step % 10 == 9) average.assign(bias->value());
    average.value();  // a read per step, e.g. for logging: copies only after updates
  }
  double ms = ms_since(t0);
  weights->device().synchronize();
  double moved = 3.0 * static_cast<double>(weights->value().nbytes()) * steps;
  std::printf("%d steps in %.2f ms (%.1f GB/s of dense updates on %s)\n", steps, ms,
              moved / (ms * 1e-3) / 1e9, weights->device().name().c_str());

  Tensor b = bias->eval(sess);
  Tensor w = weights->eval(sess);
  std::printf("global_step = %lld\n", static_cast<long long>(global_step.eval(sess).scalar<int64_t>()));
  std::printf("dense/bias[0:3] = %.4f %.4f %.4f (expected %.4f)\n", b.data<float>()[0],
              b.data<float>()[1], b.data<float>()[2], 0.01 * steps);
  std::printf("dense/kernel[0,0] = %.5f (expected %.5f)\n", w.data<float>()[0], w0 - 0.001 * steps);
  std::printf("bias_average read %d times through its caching device: %llu copies\n", steps,
              static_cast<unsigned long long>(average.cache_copies()));
  // Checkpoint in TensorFlow's format, clobber the variables, restore.
  std::string dir = ckpt_dir.empty() ? make_temp_dir() : ckpt_dir;
  Saver saver({.sharded = true, .max_to_keep = 2});
  t0 = std::chrono::steady_clock::now();
  std::string path = *saver.save(sess, dir + "/model", {.global_step = global_step}).path();
  double save_ms = ms_since(t0);
  weights->assign(Tensor::zeros(DType::kFloat, {inputs, hidden}));
  bias->assign(Tensor::zeros(DType::kFloat, {hidden}));
  t0 = std::chrono::steady_clock::now();
  saver.restore(sess, *latest_checkpoint(dir));
  double restore_ms = ms_since(t0);
  bool restored = weights->eval(sess).to_vector<float>() == w.to_vector<float>() &&
                  bias->eval(sess).to_vector<float>() == b.to_vector<float>();
  std::printf("saved %s (%.1f MiB) in %.1f ms, restored in %.1f ms: %s\n", path.c_str(),
              (w.nbytes() + b.nbytes()) / 1048576.0, save_ms, restore_ms,
              restored ? "bit-exact" : "MISMATCH");
  if (ckpt_dir.empty()) std::filesystem::remove_all(dir);

  bool ok = restored && std::abs(b.data<float>()[0] - 0.01f * steps) < 1e-3f * steps &&
            std::abs(w.data<float>()[0] - (w0 - 0.001f * steps)) < 1e-4f * steps &&
            std::abs(w0) <= limit &&
            global_step.eval(sess).scalar<int64_t>() == steps;
  std::printf("demo %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

Action add_demo_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("demo", "the main job: build, initialize and train variables");
  auto steps = std::make_shared<int>(100);
  auto ckpt_dir = std::make_shared<std::string>();
  cmd->add_option("--steps", *steps, "training steps")->check(count_at_least(0))->capture_default_str();
  cmd->add_option("--checkpoint_dir", *ckpt_dir,
                  "where to save the checkpoint (default: a temporary folder, removed afterwards)");
  return [steps, ckpt_dir] { return demo(*steps, *ckpt_dir); };
}

}  // namespace varstate::cli
