// Op and Session: deferred actions and the object that runs them.
//
// varstate executes eagerly: tensors are computed when their expression is
// evaluated. What TensorFlow expresses as graph operations that a program
// builds first and runs later — variable initializers, grouped
// initializers, save and restore — are Ops here: named actions run by
// Session::run, giving the docs' workflow
//   Op init = global_variables_initializer();
//   Session sess;
//   sess.run(init);
//   Tensor w_host = w.eval(sess);
// Ops that read placeholders (varstate/placeholder.h) run with a FeedDict:
//   sess.run(train_op, {{ids, batch_ids}, {"grads", batch_grads}});
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "varstate/placeholder.h"
#include "varstate/tensor.h"

namespace varstate {

class Op;
namespace internal {
struct OpGraphForm;
Op make_op(std::string name, std::string type, std::function<void()> action,
           std::shared_ptr<const OpGraphForm> form, std::vector<Placeholder> placeholders);
const OpGraphForm* graph_form(const Op& op);
Op renamed(const Op& op, std::string name);
void run_fed(const Op& op);
}  // namespace internal

class Op {
 public:
  // An empty Op: running it does nothing (a no-op such as initialize_variables({})).
  Op() = default;
  Op(std::string name, std::string type, std::function<void()> action);

  // Runs the action with `feeds` giving the placeholders' values. Checks
  // the feeds first, so that a run that throws here changed nothing: a
  // placeholder the Op reads and `feeds` lacks raises InvalidArgumentError
  // ("You must feed a value for placeholder tensor "x" with dtype float32
  // and shape [2]"), as does a fed value of another dtype or a name that is
  // no placeholder of the Op or of the default graph; a value of an
  // incompatible shape raises ValueError. Exceptions from the action
  // propagate unchanged.
  void run(const FeedDict& feeds = {}) const;

  const std::string& name() const;
  const std::string& type() const;
  bool valid() const { return state_ != nullptr; }
  // The placeholders a run must feed.
  const std::vector<Placeholder>& placeholders() const;

  // An Op whose action runs each of `ops` in order (tf.group).
  static Op group(std::vector<Op> ops, std::string name);

 private:
  struct State {
    std::string name;
    std::string type;
    std::function<void()> action;
    std::shared_ptr<const internal::OpGraphForm> form;  // how it is exported; may be null
    std::vector<Placeholder> placeholders;
  };
  explicit Op(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  friend Op internal::make_op(std::string, std::string, std::function<void()>,
                              std::shared_ptr<const internal::OpGraphForm>,
                              std::vector<Placeholder>);
  friend const internal::OpGraphForm* internal::graph_form(const Op&);
  friend Op internal::renamed(const Op&, std::string);
  friend void internal::run_fed(const Op&);
  std::shared_ptr<const State> state_;
};

class Variable;

class Session {
 public:
  Session() = default;
  // Runs `op` (see Op::run for the feeds' checks).
  void run(const Op& op, const FeedDict& feeds = {}) const { op.run(feeds); }
  // Runs each op in order; every op's feeds are checked before the first runs.
  void run(const std::vector<Op>& ops, const FeedDict& feeds = {}) const;
  // The value of `t` copied to the host (waits for pending device work).
  Tensor run(const Tensor& t) const { return t.to_host().clone(); }
  Tensor run(const Variable& v) const;

  // Makes this session the thread's default (tf.Session's `with` block)
  // until the returned guard is destroyed.
  class DefaultGuard {
   public:
    explicit DefaultGuard(const Session* s);
    ~DefaultGuard();
    DefaultGuard(const DefaultGuard&) = delete;
    DefaultGuard& operator=(const DefaultGuard&) = delete;

   private:
    const Session* previous_;
  };
  [[nodiscard]] DefaultGuard as_default() const { return DefaultGuard(this); }

  // The thread's default session, or nullptr.
  static const Session* default_session();
};

}  // namespace varstate
