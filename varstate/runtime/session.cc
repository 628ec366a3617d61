#include "varstate/runtime/session.h"

#include "varstate/runtime/variable.h"

namespace varstate {

Op::Op(std::string name, std::string type, std::function<void()> action)
    : state_(std::make_shared<const State>(
          State{std::move(name), std::move(type), std::move(action)})) {}

void Op::run() const {
  if (state_ && state_->action) state_->action();
}

const std::string& Op::name() const {
  static const std::string kEmpty;
  return state_ ? state_->name : kEmpty;
}

const std::string& Op::type() const {
  static const std::string kNoOp = "NoOp";
  return state_ ? state_->type : kNoOp;
}

Op Op::group(std::vector<Op> ops, std::string name) {
  return Op(std::move(name), "NoOp", [ops = std::move(ops)] {
    for (const Op& op : ops) op.run();
  });
}

void Session::run(const std::vector<Op>& ops) const {
  for (const Op& op : ops) op.run();
}

Tensor Session::run(const Variable& v) const { return v.eval(*this); }

namespace {
thread_local const Session* t_default_session = nullptr;
}

Session::DefaultGuard::DefaultGuard(const Session* s) : previous_(t_default_session) {
  t_default_session = s;
}

Session::DefaultGuard::~DefaultGuard() { t_default_session = previous_; }

const Session* Session::default_session() { return t_default_session; }

}  // namespace varstate
