#include "optimizer_cases.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include "tensor_text.h"
#include "varstate/checkpoint_utils.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/learning_rate_decay.h"
#include "varstate/moving_averages.h"
#include "varstate/optimizers.h"
#include "varstate/partitioners.h"
#include "varstate/saver.h"
#include "varstate/session.h"
#include "varstate/variable_scope.h"
#include "varstate/variables.h"

namespace varstate::interop {
namespace {

// The optimizers of test_optimizers.py, with its hyperparameters.
// `step`: the global step, for the optimizers that read it (AdagradDA).
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const Variable& step) {
  if (name == "adagrad_da") {
    return std::make_unique<AdagradDAOptimizer>(
        0.1, step,
        AdagradDAOptions{.l1_regularization_strength = 0.01, .l2_regularization_strength = 0.02});
  }
  if (name == "adagrad_da_plain") return std::make_unique<AdagradDAOptimizer>(0.1, step);
  using Make = std::function<std::unique_ptr<Optimizer>()>;
  static const std::map<std::string, Make> optimizers = {
      {"sgd", [] { return std::make_unique<GradientDescentOptimizer>(0.1); }},
      {"momentum", [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); }},
      {"nesterov",
       [] {
         return std::make_unique<MomentumOptimizer>(0.1, 0.9,
                                                    MomentumOptions{.use_nesterov = true});
       }},
      {"adagrad", [] { return std::make_unique<AdagradOptimizer>(0.1); }},
      {"adam", [] { return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = 0.01}); }},
      {"rmsprop",
       [] { return std::make_unique<RMSPropOptimizer>(0.01, RMSPropOptions{.momentum = 0.5}); }},
      {"rmsprop_centered",
       [] {
         return std::make_unique<RMSPropOptimizer>(
             0.01, RMSPropOptions{.momentum = 0.5, .centered = true});
       }},
      {"ftrl",
       [] {
         return std::make_unique<FtrlOptimizer>(
             0.1,
             FtrlOptions{.l1_regularization_strength = 0.01, .l2_regularization_strength = 0.02});
       }},
      {"ftrl_shrinkage",
       [] {
         return std::make_unique<FtrlOptimizer>(
             0.1, FtrlOptions{.l2_shrinkage_regularization_strength = 0.05});
       }},
      {"ftrl_power",
       [] {
         return std::make_unique<FtrlOptimizer>(0.1, FtrlOptions{.learning_rate_power = -0.3});
       }},
      {"adadelta",
       [] {
         return std::make_unique<AdadeltaOptimizer>(
             AdadeltaOptions{.learning_rate = 1.0, .rho = 0.9, .epsilon = 1e-6});
       }},
      {"proximal_sgd",
       [] {
         return std::make_unique<ProximalGradientDescentOptimizer>(
             0.1, ProximalGradientDescentOptions{.l1_regularization_strength = 0.05,
                                                 .l2_regularization_strength = 0.02});
       }},
      {"proximal_sgd_l1",
       [] {
         return std::make_unique<ProximalGradientDescentOptimizer>(
             0.1, ProximalGradientDescentOptions{.l1_regularization_strength = 0.05});
       }},
      {"proximal_sgd_l2",
       [] {
         return std::make_unique<ProximalGradientDescentOptimizer>(
             0.1, ProximalGradientDescentOptions{.l2_regularization_strength = 0.02});
       }},
      {"proximal_adagrad",
       [] {
         return std::make_unique<ProximalAdagradOptimizer>(
             0.1, ProximalAdagradOptions{.l1_regularization_strength = 0.01,
                                         .l2_regularization_strength = 0.02});
       }},
      {"proximal_adagrad_plain", [] { return std::make_unique<ProximalAdagradOptimizer>(0.1); }},
  };
  auto found = optimizers.find(name);
  if (found == optimizers.end()) {
    throw InvalidArgumentError("interop_tool optimize: unknown optimizer " + quoted(name));
  }
  return found->second();
}

// The arguments after the mode: IN FIRST LAST OUT [RESTORE|-] [SAVE|-].
struct StepArgs {
  std::map<std::string, Tensor> in;
  int first = 0, last = 0;
  std::string out, restore, save;
};

StepArgs step_args(const std::vector<std::string>& args) {
  StepArgs a;
  for (const TextTensor& t : read_text_file(args.at(1))) a.in.emplace(t.key, to_tensor(t));
  a.first = std::stoi(args.at(2));
  a.last = std::stoi(args.at(3));
  a.out = args.at(4);
  a.restore = args.size() > 5 ? args.at(5) : "-";
  a.save = args.size() > 6 ? args.at(6) : "-";
  return a;
}

// Every global variable (op name -> value) to `path`.
void write_globals(const std::string& path, const std::string& who) {
  std::ofstream out(path);
  if (!out) throw NotFoundError("interop_tool " + who + ": cannot write " + quoted(path));
  for (const Variable& v : global_variables()) {
    out << format_line(v.op_name(), v.value().to_host()) << "\n";
  }
}

}  // namespace

int cmd_optimize(const std::vector<std::string>& args) {
  const StepArgs a = step_args(args);
  const std::map<std::string, Tensor>& in = a.in;
  const int first = a.first, last = a.last;
  const std::string& restore = a.restore;
  const std::string& save = a.save;
  reset_default_graph();
  Variable w(in.at("w"), {.name = "w"});
  Variable emb(in.at("emb"), {.name = "emb"});
  // "d" (float64) unless the case leaves it out.
  std::vector<Variable> vars = {w, emb};
  if (in.count("d") != 0) vars.push_back(Variable(in.at("d"), {.name = "d"}));
  Variable step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "global_step"});
  Session session;
  session.run(global_variables_initializer());
  std::unique_ptr<Optimizer> opt = make_optimizer(args.at(0), step);
  opt->create_slots(vars);
  if (restore != "-") Saver().restore(session, restore);
  for (int s = first; s < last; ++s) {
    const std::string p = std::to_string(s) + "/";
    std::vector<GradientAndVariable> grads = {
        {in.at(p + "w"), w},
        {IndexedSlices(in.at(p + "emb/values"), in.at(p + "emb/indices")), emb}};
    if (vars.size() == 3) grads.push_back({in.at(p + "d"), vars[2]});
    opt->apply_gradients(grads, &step);
  }
  write_globals(a.out, "optimize");
  if (save != "-") Saver().save(session, save).wait();
  return 0;
}

int cmd_moving_average(const std::vector<std::string>& args) {
  const std::string& mode = args.at(0);
  const StepArgs a = step_args(args);
  const std::map<std::string, Tensor>& in = a.in;
  reset_default_graph();
  Session session;
  if (mode == "assign" || mode == "assign_nodebias") {
    Variable v(in.at("v"), {.name = "v"});
    session.run(global_variables_initializer());
    if (a.restore != "-") Saver().restore(session, a.restore);
    for (int s = a.first; s < a.last; ++s) {
      assign_moving_average(v, in.at(std::to_string(s) + "/w"), 0.9, mode == "assign");
    }
  } else if (mode == "ema" || mode == "ema_plain" || mode == "ema_restore") {
    Variable w(in.at("w"), {.name = "w"});
    Variable emb(in.at("emb"), {.name = "emb"});
    Variable d(in.at("d"), {.name = "d"});
    Variable step(Tensor::from_vector<int64_t>({0}, {}),
                  {.trainable = false, .name = "global_step"});
    GradientDescentOptimizer opt(0.1);
    ExponentialMovingAverageOptions options;
    if (mode != "ema_plain") options.num_updates = step;
    ExponentialMovingAverage ema(mode == "ema_plain" ? 0.9 : 0.99, options);
    const Op maintain = ema.apply({w, emb, d});
    session.run(global_variables_initializer());
    if (mode == "ema_restore") {
      Saver({.var_list = ema.variables_to_restore()}).restore(session, a.restore);
    } else if (a.restore != "-") {
      Saver().restore(session, a.restore);
    }
    for (int s = a.first; s < a.last; ++s) {
      const std::string p = std::to_string(s) + "/";
      opt.apply_gradients({{in.at(p + "w"), w},
                           {IndexedSlices(in.at(p + "emb/values"), in.at(p + "emb/indices")), emb},
                           {in.at(p + "d"), d}},
                          &step);
      session.run(maintain);
    }
  } else {
    throw InvalidArgumentError("interop_tool moving_average: unknown mode " + quoted(mode));
  }
  write_globals(a.out, "moving_average");
  if (a.save != "-" && mode != "ema_restore") Saver().save(session, a.save).wait();
  return 0;
}

int cmd_lr_schedule(const std::vector<std::string>& args) {
  const int steps = std::stoi(args.at(0));
  reset_default_graph();
  Variable step(Tensor::from_vector<int64_t>({0}, {}), {.trainable = false, .name = "global_step"});
  Variable x(Tensor::from_vector<float>({0.f}, {}), {.trainable = false, .name = "x"});
  Variable lr64(Tensor::from_vector<double>({0.1}, {}), {.trainable = false, .name = "lr64"});
  Session session;
  session.run(global_variables_initializer());
  // The schedules of test_lr_schedules.py, by name.
  const std::vector<std::pair<std::string, Hyperparameter>> schedules = {
      {"exp", exponential_decay(0.1, step, 100, 0.96)},
      {"exp_stair", exponential_decay(0.1, step, 100, 0.96, true)},
      {"exp_f64", exponential_decay(lr64, step, 100, 0.96)},
      {"natural_exp", natural_exp_decay(0.1, step, 100, 0.5)},
      {"natural_exp_stair", natural_exp_decay(0.1, step, 100, 0.5, true)},
      {"inverse_time", inverse_time_decay(0.1, step, 100, 0.5)},
      {"inverse_time_stair", inverse_time_decay(0.1, step, 100, 0.5, true)},
      {"poly", polynomial_decay(0.1, step, 1000)},
      {"poly_cycle", polynomial_decay(0.1, step, 300, 0.001, 0.5, true)},
      {"poly_f64", polynomial_decay(lr64, step, 700, 0.003, 2.0)},
      {"poly_cube", polynomial_decay(0.1, step, 800, 0.0, 3.0, true)},
      {"poly_odd", polynomial_decay(0.1, step, 900, 0.01, 1.7)},
      {"poly_cube_f64", polynomial_decay(lr64, step, 600, 0.01, 3.0)},
      {"poly_square", polynomial_decay(0.1, step, 500, 0.02, 2.0)},
      {"cosine", cosine_decay(0.1, step, 1000)},
      {"cosine_alpha", cosine_decay(0.1, step, 1000, 0.1)},
      {"restarts", cosine_decay_restarts(0.1, step, 200)},
      {"restarts_flat", cosine_decay_restarts(0.1, step, 150, 1.0, 0.9, 0.01)},
      {"restarts_geometric", cosine_decay_restarts(0.1, step, 120, 1.5, 0.8, 0.02)},
      {"linear_cosine", linear_cosine_decay(0.1, step, 1000, 2.0, 0.05, 0.01)},
      {"piecewise", piecewise_constant(step, {100, 300}, {1.0, 0.5, 0.1})},
      {"piecewise_float", piecewise_constant(x, {0.5, 1.7}, {0.3, 0.2, 0.1})},
  };
  std::vector<std::vector<Tensor>> values(schedules.size());
  for (int s = 0; s < steps; ++s) {
    step.assign(Tensor::from_vector<int64_t>({s}, {}));
    x.assign(Tensor::from_vector<float>({static_cast<float>(s) * 0.0137f}, {}));
    for (size_t k = 0; k < schedules.size(); ++k) {
      values[k].push_back(schedules[k].second.tensor());
    }
  }
  std::ofstream out(args.at(1));
  if (!out) throw NotFoundError("interop_tool lr_schedule: cannot write " + quoted(args.at(1)));
  for (size_t k = 0; k < schedules.size(); ++k) {
    const DType dtype = values[k].front().dtype();
    Tensor all(dtype, {steps});
    for (int s = 0; s < steps; ++s) {
      std::memcpy(static_cast<char*>(all.raw_data()) + s * dtype_size(dtype),
                  values[k][s].raw_data(), dtype_size(dtype));
    }
    out << format_line(schedules[k].first, all) << "\n";
  }
  return 0;
}

int cmd_init_from_checkpoint(const std::vector<std::string>& args) {
  reset_default_graph();
  {
    VariableScopeGuard enc = variable_scope("enc");
    get_variable("w", {.shape = TensorShape{2, 3}});
    get_variable("b", {.shape = TensorShape{3}});
    get_variable("emb", {.shape = TensorShape{10, 2}, .partitioner = fixed_size_partitioner(2)});
  }
  get_variable("extra", {.shape = TensorShape{4}});
  get_variable("kept", {.shape = TensorShape{2}, .initializer = ones_initializer()});
  init_from_checkpoint(args.at(0),
                       {{"pre/", std::string("enc/")}, {"other", std::string("extra")}});
  Session session;
  session.run(global_variables_initializer());
  write_globals(args.at(1), "init_from_checkpoint");
  return 0;
}

}  // namespace varstate::interop
