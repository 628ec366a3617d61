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
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "varstate/runtime/tensor.h"

namespace varstate {

class Op {
 public:
  // An empty Op: running it does nothing (a no-op such as initialize_variables({})).
  Op() = default;
  Op(std::string name, std::string type, std::function<void()> action);

  // Runs the action. Exceptions from the action propagate unchanged.
  void run() const;

  const std::string& name() const;
  const std::string& type() const;
  bool valid() const { return state_ != nullptr; }

  // An Op whose action runs each of `ops` in order (tf.group).
  static Op group(std::vector<Op> ops, std::string name);

 private:
  struct State {
    std::string name;
    std::string type;
    std::function<void()> action;
  };
  std::shared_ptr<const State> state_;
};

class Variable;

class Session {
 public:
  Session() = default;
  // Runs `op`.
  void run(const Op& op) const { op.run(); }
  // Runs each op in order.
  void run(const std::vector<Op>& ops) const;
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
