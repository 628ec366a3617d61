#include "optimizer_cases.h"

#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include "tensor_text.h"
#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/moving_averages.h"
#include "varstate/optimizers.h"
#include "varstate/saver.h"
#include "varstate/session.h"
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

}  // namespace

int cmd_optimize(const std::vector<std::string>& args) {
  std::map<std::string, Tensor> in;
  for (const TextTensor& t : read_text_file(args.at(1))) in.emplace(t.key, to_tensor(t));
  const int first = std::stoi(args.at(2));
  const int last = std::stoi(args.at(3));
  const std::string restore = args.size() > 5 ? args.at(5) : "-";
  const std::string save = args.size() > 6 ? args.at(6) : "-";
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
  std::ofstream out(args.at(4));
  if (!out) throw NotFoundError("interop_tool optimize: cannot write " + quoted(args.at(4)));
  for (const Variable& v : global_variables()) {
    out << format_line(v.op_name(), v.value().to_host()) << "\n";
  }
  if (save != "-") Saver().save(session, save).wait();
  return 0;
}

int cmd_moving_average(const std::vector<std::string>& args) {
  const std::string& mode = args.at(0);
  std::map<std::string, Tensor> in;
  for (const TextTensor& t : read_text_file(args.at(1))) in.emplace(t.key, to_tensor(t));
  const int first = std::stoi(args.at(2));
  const int last = std::stoi(args.at(3));
  const std::string restore = args.size() > 5 ? args.at(5) : "-";
  const std::string save = args.size() > 6 ? args.at(6) : "-";
  reset_default_graph();
  Session session;
  if (mode == "assign" || mode == "assign_nodebias") {
    Variable v(in.at("v"), {.name = "v"});
    session.run(global_variables_initializer());
    if (restore != "-") Saver().restore(session, restore);
    for (int s = first; s < last; ++s) {
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
      Saver({.var_list = ema.variables_to_restore()}).restore(session, restore);
    } else if (restore != "-") {
      Saver().restore(session, restore);
    }
    for (int s = first; s < last; ++s) {
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
  std::ofstream out(args.at(4));
  if (!out) throw NotFoundError("interop_tool moving_average: cannot write " + quoted(args.at(4)));
  for (const Variable& v : global_variables()) {
    out << format_line(v.op_name(), v.value().to_host()) << "\n";
  }
  if (save != "-" && mode != "ema_restore") Saver().save(session, save).wait();
  return 0;
}

}  // namespace varstate::interop
