// The dense training ops against the machine's limit for their bytes.
//
// Each dense op (varstate/training_ops.h) reads the variable, its slots and
// the gradient and writes the variable and the slots back: for Adam, var,
// m, v and grad in, var, m and v out, 7 tensor sizes a step. Its limit is a
// pass that moves exactly those bytes and computes nothing: the same
// number of tensors of the same size, each written one XORed with the
// gradient-sized one in place, split over the same thread pool and
// vectorized as wide as the CPU allows. The two alternate, after an
// untimed run of each, so that both see the same machine; medians of the
// pairs.
//
//   bench_dense_training [--quick] [--only OP/DTYPE] [--reps N] [--out F.json]
//                        [--machine NAME]
//
// Ops: gradient_descent, momentum, adagrad, adam, rms_prop,
// centered_rms_prop, ftrl, adadelta, proximal_gradient_descent,
// proximal_adagrad, adagrad_da, and moving_average (the Op of
// ExponentialMovingAverage(0.999).apply: the average read and written, the
// variable read, as gradient descent's bytes; bfloat16 runs TensorFlow's
// three rounded ops, varstate/moving_averages.h); dtypes float32,
// bfloat16 and float16; 64M elements a
// tensor (16M with --quick). Prints one line per case and, with --out, a
// JSON document (bench/results/). bench/compare_torch_optimizers.py runs
// PyTorch's optimizers on the same sizes, interleaved with this program.
#include <sys/utsname.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/eigen_support.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/training_ops.h"
#include "timing.h"
#include "varstate/device_manager.h"
#include "varstate/graph.h"
#include "varstate/moving_averages.h"
#include "varstate/training_ops.h"
#include "varstate/variable.h"
#include "varstate/variables.h"

using namespace varstate;
using varstate::bench::median;
using varstate::bench::seconds_of_call;

namespace {

using kernels::TrainingOp;

struct OpInfo {
  const char* name;
  TrainingOp op;
};

constexpr OpInfo kOps[] = {{"gradient_descent", TrainingOp::kGradientDescent},
                           {"momentum", TrainingOp::kMomentum},
                           {"adagrad", TrainingOp::kAdagrad},
                           {"adam", TrainingOp::kAdam},
                           {"rms_prop", TrainingOp::kRMSProp},
                           {"centered_rms_prop", TrainingOp::kCenteredRMSProp},
                           {"ftrl", TrainingOp::kFtrl},
                           {"adadelta", TrainingOp::kAdadelta},
                           {"proximal_gradient_descent", TrainingOp::kProximalGradientDescent},
                           {"proximal_adagrad", TrainingOp::kProximalAdagrad},
                           {"adagrad_da", TrainingOp::kAdagradDA},
                           {"moving_average", TrainingOp::kMovingAverage}};

// The hyperparameters of every case: the compute floor's kernel calls and
// run_case's public calls. The proximal ops and AdagradDA take l1 > 0
// (their soft threshold), AdagradDA at step 100; l2 > 0 too, but proximal
// gradient descent keeps TensorFlow's default l2 = 0 (its division by 1 is
// left out); Ftrl keeps l1 = l2 = 0.
kernels::TrainingHyper hyper(TrainingOp op) {
  kernels::TrainingHyper h;
  if (op == TrainingOp::kProximalGradientDescent || op == TrainingOp::kProximalAdagrad ||
      op == TrainingOp::kAdagradDA) {
    h.l1 = 0.001;
    h.l2 = op == TrainingOp::kProximalGradientDescent ? 0.0 : 0.001;
  }
  h.global_step = 100;
  h.lr = 0.001;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.beta1_power = 0.9;
  h.beta2_power = 0.999;
  h.epsilon = 1e-8;
  h.momentum = 0.9;
  h.rho = 0.9;
  return h;
}

// The limit's inner loop: every written word XORed in place with the
// read-only one, which is loaded once for all of them. Words, not floats:
// no value can slow it down.
template <int K, typename Word>
inline void xor_into(Word* const* written, const Word* read, int64_t begin, int64_t end) {
  Word* out[K];
  for (int w = 0; w < K; ++w) out[w] = written[w];
  for (int64_t i = begin; i < end; ++i) {
    const Word g = read[i];
    for (int w = 0; w < K; ++w) out[w][i] = static_cast<Word>(out[w][i] ^ g);
  }
}

template <typename Word>
inline void xor_streams(Word* const* written, int count, const Word* read, int64_t begin,
                        int64_t end) {
  switch (count) {
    case 1:
      return xor_into<1>(written, read, begin, end);
    case 2:
      return xor_into<2>(written, read, begin, end);
    case 3:
      return xor_into<3>(written, read, begin, end);
    case 4:
      return xor_into<4>(written, read, begin, end);
    default:
      std::abort();
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
template <typename Word>
__attribute__((target("avx512f,avx512vl,avx512bw"), flatten)) void xor_streams_avx512(
    Word* const* written, int count, const Word* read, int64_t begin, int64_t end) {
  xor_streams(written, count, read, begin, end);
}
bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw");
}
#endif

// The limit for one case: `count` written tensors and one read-only, of
// n words each.
template <typename Word>
class Limit {
 public:
  Limit(int count, int64_t n) : count_(count), n_(n), read_(static_cast<size_t>(n), Word(3)) {
    for (int w = 0; w < count; ++w) {
      written_.emplace_back(static_cast<size_t>(n), static_cast<Word>(w + 1));
      pointers_.push_back(written_.back().data());
    }
  }
  void run() {
    const double bytes = static_cast<double>(sizeof(Word)) * (2 * count_ + 1);
    auto body = [this](int64_t begin, int64_t end) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
      static const bool avx512 = has_avx512();
      if (avx512) return xor_streams_avx512(pointers_.data(), count_, read_.data(), begin, end);
#endif
      xor_streams(pointers_.data(), count_, read_.data(), begin, end);
    };
    kernels::cpu::eigen_device().parallelFor(
        n_, Eigen::TensorOpCost(bytes, bytes, 1.0),
        [&body](Eigen::Index begin, Eigen::Index end) { body(begin, end); });
  }

 private:
  int count_;
  int64_t n_;
  std::vector<Word> read_;
  std::vector<std::vector<Word>> written_;
  std::vector<Word*> pointers_;
};

// The op's arithmetic alone: the kernel on tensors that stay in the core's
// caches (4,096 elements, one thread), called over and over. Its time per
// element, times n over the pool's threads, is what the op would take if
// memory were free: the compute floor of this machine.
template <typename T>
double compute_floor_s(TrainingOp op, int64_t n) {
  constexpr int64_t kSmall = 4096;
  constexpr int kCalls = 2000;
  std::vector<T> var(kSmall, T(0.5f)), s0(kSmall, T(0.1f)), s1(kSmall, T(0.1f)),
      s2(kSmall, T(0.01f)), grad(kSmall, T(0.001f));
  const kernels::TrainingSlots<T> slots{var.data(), s0.data(), s1.data(), s2.data()};
  const kernels::TrainingHyper h = hyper(op);
  auto calls = [&] {
    for (int i = 0; i < kCalls; ++i)
      kernels::cpu::apply_dense<T>(op, h, slots, grad.data(), kSmall, 1);
  };
  calls();  // untimed
  double best = seconds_of_call(calls);
  for (int r = 0; r < 4; ++r) best = std::min(best, seconds_of_call(calls));
  const int threads = kernels::cpu::eigen_device().numThreads();
  return best / (static_cast<double>(kCalls) * kSmall) * static_cast<double>(n) / threads;
}

Variable filled(DType dtype, int64_t n, float value, const std::string& name) {
  Variable v(Tensor::filled(dtype, {n}, Tensor(value), DeviceManager::instance().cpu()),
             {.name = name});
  v.initializer().run();
  return v;
}

// A gradient of small values of both signs, in dtype.
Tensor gradient(DType dtype, int64_t n) {
  std::vector<float> g(static_cast<size_t>(n));
  uint64_t x = 20261128;
  for (float& e : g) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) / float(1 << 23) * 0.01f;
  }
  return Tensor::from_vector<float>(g, {n}).cast(dtype);
}

struct Result {
  std::string op, dtype;
  int64_t elements;
  double bytes, op_s, limit_s, floor_s;
  // The bound the op cannot beat here: the slower of the two limits.
  double bound_s() const { return std::max(limit_s, floor_s); }
};

Result run_case(const OpInfo& info, DType dtype, int64_t n, int reps) {
  reset_default_graph();
  const std::string op = info.name;
  Variable var = filled(dtype, n, 0.5f, "var");
  // Accumulators start positive (Adagrad's and Ftrl's take square roots).
  std::vector<Variable> slots;
  const int slot_count = kernels::training_slot_count(info.op);
  for (int s = 0; s < slot_count; ++s)
    slots.push_back(filled(dtype, n, 0.1f, "slot" + std::to_string(s)));
  const Tensor grad = gradient(dtype, n);
  // The public calls, with hyper()'s values (the compute floor's).
  const kernels::TrainingHyper h = hyper(info.op);
  const auto lr = static_cast<float>(h.lr), beta1 = static_cast<float>(h.beta1),
             beta2 = static_cast<float>(h.beta2), b1p = static_cast<float>(h.beta1_power),
             b2p = static_cast<float>(h.beta2_power), eps = static_cast<float>(h.epsilon),
             momentum = static_cast<float>(h.momentum), rho = static_cast<float>(h.rho),
             l1 = static_cast<float>(h.l1), l2 = static_cast<float>(h.l2);
  std::function<void()> step;
  std::optional<ExponentialMovingAverage> ema;
  varstate::Op maintain_average;
  switch (info.op) {
    case TrainingOp::kMovingAverage:
      ema.emplace(0.999);
      maintain_average = ema->apply({var});
      variables_initializer(ema->averages()).run();
      step = [&] { maintain_average.run(); };
      break;
    case TrainingOp::kGradientDescent:
      step = [&] { apply_gradient_descent(var, lr, grad); };
      break;
    case TrainingOp::kMomentum:
      step = [&] { apply_momentum(var, slots[0], lr, grad, momentum); };
      break;
    case TrainingOp::kAdagrad:
      step = [&] { apply_adagrad(var, slots[0], lr, grad); };
      break;
    case TrainingOp::kAdam:
      step = [&] { apply_adam(var, slots[0], slots[1], b1p, b2p, lr, beta1, beta2, eps, grad); };
      break;
    case TrainingOp::kRMSProp:
      step = [&] { apply_rms_prop(var, slots[0], slots[1], lr, rho, momentum, eps, grad); };
      break;
    case TrainingOp::kCenteredRMSProp:
      step = [&] {
        apply_centered_rms_prop(var, slots[0], slots[1], slots[2], lr, rho, momentum, eps, grad);
      };
      break;
    case TrainingOp::kAdadelta:
      step = [&] { apply_adadelta(var, slots[0], slots[1], lr, rho, eps, grad); };
      break;
    case TrainingOp::kProximalGradientDescent:
      step = [&] { apply_proximal_gradient_descent(var, lr, l1, l2, grad); };
      break;
    case TrainingOp::kProximalAdagrad:
      step = [&] { apply_proximal_adagrad(var, slots[0], lr, l1, l2, grad); };
      break;
    case TrainingOp::kAdagradDA:
      step = [&] {
        apply_adagrad_da(var, slots[0], slots[1], grad, lr, l1, l2,
                         Tensor(static_cast<int64_t>(h.global_step)));
      };
      break;
    default:  // kFtrl: l1 = l2 = 0, lr_power = -0.5 (hyper()'s defaults)
      step = [&] {
        apply_ftrl(var, slots[0], slots[1], grad, lr, l1, l2, static_cast<float>(h.lr_power));
      };
  }
  const int written = 1 + slot_count;
  const double bytes = static_cast<double>(dtype_size(dtype)) * n * (2 * written + 1);
  std::function<void()> limit;
  std::optional<Limit<uint32_t>> limit32;
  std::optional<Limit<uint16_t>> limit16;
  if (dtype_size(dtype) == 4) {
    limit32.emplace(written, n);
    limit = [&] { limit32->run(); };
  } else {
    limit16.emplace(written, n);
    limit = [&] { limit16->run(); };
  }
  step();  // untimed: first touches, pool start
  limit();
  std::vector<double> op_s, limit_s;
  for (int r = 0; r < reps; ++r) {
    op_s.push_back(seconds_of_call(step));
    limit_s.push_back(seconds_of_call(limit));
  }
  const double floor_s = dtype == DType::kFloat      ? compute_floor_s<float>(info.op, n)
                         : dtype == DType::kBFloat16 ? compute_floor_s<bfloat16>(info.op, n)
                                                     : compute_floor_s<half>(info.op, n);
  return {op, std::string(dtype_name(dtype)), n, bytes, median(op_s), median(limit_s), floor_s};
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string one, five;
  f >> one >> five;
  return one + " " + five;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int reps = 7;
  std::string only, out, machine;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_dense_training: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      quick = true;
    } else if (a == "--only") {
      only = value();
    } else if (a == "--reps") {
      reps = std::atoi(value().c_str());
    } else if (a == "--out") {
      out = value();
    } else if (a == "--machine") {
      machine = value();
    } else {
      std::fprintf(stderr,
                   "usage: bench_dense_training [--quick] [--only OP/DTYPE] [--reps N] "
                   "[--out F.json] [--machine NAME]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (machine.empty()) {
    utsname u{};
    uname(&u);
    machine = u.nodename;
  }
  const int64_t n = (quick ? 16 : 64) << 20;
  const std::string load_start = load_average();
  std::vector<Result> results;
  bool matched = false;
  for (DType dtype : {DType::kFloat, DType::kBFloat16, DType::kHalf}) {
    for (const OpInfo& info : kOps) {
      const std::string label = std::string(info.name) + "/" + std::string(dtype_name(dtype));
      if (!only.empty() && only != label) continue;
      matched = true;
      const Result r = run_case(info, dtype, n, reps);
      std::printf(
          "%-26s %8.2f ms %6.2f GB/s | memory limit %8.2f ms (%.3f of it) | compute floor "
          "%8.2f ms | %.3f of the bound\n",
          label.c_str(), r.op_s * 1e3, r.bytes / r.op_s / 1e9, r.limit_s * 1e3, r.limit_s / r.op_s,
          r.floor_s * 1e3, r.bound_s() / r.op_s);
      std::fflush(stdout);
      results.push_back(r);
    }
  }
  if (!matched) {
    std::fprintf(stderr, "bench_dense_training: no case %s\n", only.c_str());
    return 2;
  }
  if (!out.empty()) {
    std::ofstream f(out);
    f << "{\n  \"context\": {\"machine\": \"" << machine
      << "\", \"threads\": " << kernels::cpu::eigen_device().numThreads()
      << ", \"cpus\": " << std::thread::hardware_concurrency() << ", \"reps\": " << reps
      << ", \"load_start\": \"" << load_start << "\", \"load_end\": \"" << load_average()
      << "\"},\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      f << "    {\"op\": \"" << r.op << "\", \"dtype\": \"" << r.dtype
        << "\", \"elements\": " << r.elements << ", \"bytes\": " << r.bytes
        << ", \"ms\": " << r.op_s * 1e3 << ", \"limit_ms\": " << r.limit_s * 1e3
        << ", \"GBps\": " << r.bytes / r.op_s / 1e9
        << ", \"limit_GBps\": " << r.bytes / r.limit_s / 1e9
        << ", \"ratio_to_limit\": " << r.limit_s / r.op_s
        << ", \"compute_floor_ms\": " << r.floor_s * 1e3
        << ", \"ratio_to_bound\": " << r.bound_s() / r.op_s << "}"
        << (i + 1 < results.size() ? ",\n" : "\n");
    }
    f << "  ]\n}\n";
  }
  return 0;
}
