// Templates: functions that create their variables on the first call and
// reuse them on every later call (tf.make_template).
//
//   Tensor my_op(const Tensor& x, const std::string& scalar_name) {
//     Variable var1 = get_variable(scalar_name, {.shape = TensorShape{},
//                                                .initializer = constant_initializer(1)});
//     return x * var1;
//   }
//   auto scale_by_y = make_template("scale_by_y", my_op, {}, std::string("y"));
//   Tensor z = scale_by_y(input1);  // creates "scale_by_y/y"
//   Tensor w = scale_by_y(input2);  // reuses it
//
// Arguments after the options are bound after the call's own arguments
// (TensorFlow's **kwargs). The function must create the variables it wants
// shared with get_variable: a call after the first that adds a trainable
// variable (a plain Variable constructor) raises ValueError ("Trainable
// variable created when calling a template after the first time, perhaps
// you used tf.Variable when you meant tf.get_variable: [...]"); its other
// effects stay. Variables created with trainable = false are allowed.
//
// Scope: the template's variable scope is opened (name made unique with
// _N, unless unique_name is given) at the first call, or at construction
// with create_scope_now; each call re-enters it, the first without reuse,
// the later ones with reuse. Copies of a Template share its state. Calls
// use the thread's default graph; one call at a time per template.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "varstate/graph.h"
#include "varstate/variable_scope.h"

namespace varstate {

struct TemplateOptions {
  // Open the variable scope now rather than at the first call.
  bool create_scope_now = false;
  // The scope's name, used as is (not made unique); overrides `name`.
  std::string unique_name;
};

class TemplateBase {
 public:
  const std::string& name() const;
  // The template's variable scope, once opened.
  std::optional<VariableScope> variable_scope() const;

 protected:
  // ValueError("name cannot be None.") for an empty name.
  TemplateBase(std::string name, const TemplateOptions& options);

  // Enters the template's scope for one call; finish() runs the checks
  // after the function returned.
  class CallScope {
   public:
    explicit CallScope(TemplateBase& t);
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    void finish();

   private:
    Graph& graph_;
    std::unique_ptr<VariableScopeGuard> guard_;
    bool check_ = false;
    size_t trainable_at_start_ = 0;
  };

 private:
  struct State;
  static std::unique_ptr<VariableScopeGuard> open(Graph& graph, const std::string& name,
                                                  const VariableScope* scope,
                                                  const VariableScopeOptions& options,
                                                  bool open_name_scope);
  std::shared_ptr<State> state_;
};

template <typename Fn, typename... Bound>
class Template : public TemplateBase {
 public:
  Template(std::string name, Fn fn, const TemplateOptions& options, std::tuple<Bound...> bound)
      : TemplateBase(std::move(name), options), fn_(std::move(fn)), bound_(std::move(bound)) {}

  // Calls the function with `args` followed by the bound arguments.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    CallScope call(*this);
    auto invoke = [&] {
      return std::apply([&](auto&... bound) { return fn_(std::forward<Args>(args)..., bound...); },
                        bound_);
    };
    if constexpr (std::is_void_v<decltype(invoke())>) {
      invoke();
      call.finish();
    } else {
      decltype(auto) result = invoke();
      call.finish();
      return result;
    }
  }

 private:
  Fn fn_;
  std::tuple<Bound...> bound_;
};

// tf.make_template(name_, func_, create_scope_now_, unique_name_, **kwargs).
template <typename Fn, typename... Bound>
Template<std::decay_t<Fn>, std::decay_t<Bound>...> make_template(
    std::string name, Fn&& func, const TemplateOptions& options = {}, Bound&&... bound) {
  return Template<std::decay_t<Fn>, std::decay_t<Bound>...>(
      std::move(name), std::forward<Fn>(func), options,
      std::tuple<std::decay_t<Bound>...>(std::forward<Bound>(bound)...));
}

}  // namespace varstate
