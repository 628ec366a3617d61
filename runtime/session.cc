#include "varstate/session.h"

#include "runtime/op_node.h"
#include "varstate/variable.h"

namespace varstate {

Op::Op(std::string name, std::string type, std::function<void()> action)
    : state_(std::make_shared<const State>(
          State{std::move(name), std::move(type), std::move(action), nullptr, {}})) {}

void Op::run(const FeedDict& feeds) const {
  if (!state_) return;
  internal::check_feeds(state_->placeholders, feeds);
  internal::FeedScope scope(&feeds);
  internal::run_fed(*this);
}

const std::vector<Placeholder>& Op::placeholders() const {
  static const std::vector<Placeholder> kNone;
  return state_ ? state_->placeholders : kNone;
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
  std::vector<Placeholder> placeholders;
  for (const Op& op : ops)
    placeholders = internal::merge_placeholders(placeholders, op.placeholders());
  auto form = std::make_shared<internal::OpGraphForm>();
  form->type = "NoOp";
  form->control_inputs = ops;
  return internal::make_op(
      std::move(name), "NoOp",
      [ops = std::move(ops)] {
        for (const Op& op : ops) internal::run_fed(op);
      },
      std::move(form), std::move(placeholders));
}

void Session::run(const std::vector<Op>& ops, const FeedDict& feeds) const {
  std::vector<Placeholder> placeholders;
  for (const Op& op : ops)
    placeholders = internal::merge_placeholders(placeholders, op.placeholders());
  internal::check_feeds(placeholders, feeds);
  internal::FeedScope scope(&feeds);
  for (const Op& op : ops) internal::run_fed(op);
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

namespace internal {

Op make_op(std::string name, std::string type, std::function<void()> action,
           std::shared_ptr<const OpGraphForm> form, std::vector<Placeholder> placeholders) {
  return Op(std::make_shared<const Op::State>(Op::State{std::move(name), std::move(type),
                                                        std::move(action), std::move(form),
                                                        std::move(placeholders)}));
}

const OpGraphForm* graph_form(const Op& op) { return op.state_ ? op.state_->form.get() : nullptr; }

Op renamed(const Op& op, std::string name) {
  if (!op.state_) return op;
  Op::State state = *op.state_;
  state.name = std::move(name);
  return Op(std::make_shared<const Op::State>(std::move(state)));
}

void run_fed(const Op& op) {
  if (op.state_ && op.state_->action) op.state_->action();
}

}  // namespace internal

}  // namespace varstate
