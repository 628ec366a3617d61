#include "distributed/mpi_keyed_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <tuple>
#include <utility>

#include "distributed/mpi_storage.h"
#include "runtime/keyed_shards.h"
#include "training/keyed_training.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

constexpr int kRequestTag = 1;
// The reply tag of a request nobody waits for (replies use tags >= 1).
constexpr int kOneWay = 0;
// Messages travel as units of 64 bytes (2^31 units: 128 GiB a message);
// the first 8 bytes hold the length.
constexpr size_t kUnit = 64;
constexpr size_t kLengthBytes = 8;
// A request's header: length, op (1 byte), table id (8), reply tag (4).
constexpr size_t kTagOffset = kLengthBytes + 1 + 8;
constexpr int kYieldPolls = 200;
constexpr int kLivenessPolls = 500;  // about 0.1 s of sleeping polls
constexpr auto kNotReadyFor = std::chrono::seconds(60);

enum class Op : uint8_t {
  kSize = 1,
  kStep,
  kTick,
  kExpire,
  kReserve,
  kMemory,
  kVersion,
  kGather,
  kScatter,
  kInsert,
  kErase,
  kClear,
  kResetMember,
  kTrain,
  kExport,
  kSetHistory,
  kReplace,
  kWritePresent,
  kStartMarking,
  kTakeChanges,
  kInitialized,
  kSetInitialized,
  kRoom,
  kCandidates,
};

// kNeedsRoom: a capped table's owner did nothing, the call would insert
// keys there (RemoteKeyedTable::ask_inserting makes room, then asks again).
enum class Status : uint8_t {
  kOk = 0,
  kError = 1,
  kNotReady = 2,
  kNeedsRoom = 3,
};

Device& host() { return DeviceManager::instance().cpu(); }

// Yields for the first polls, then sleeps 0.1 ms between them, so that
// oversubscribed ranks do not spin against each other.
void pause(int polls) {
  if (polls <= kYieldPolls) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Buffers MPI may still read after their call gave up (a peer died
// mid-transfer): kept until the process exits.
void abandon(std::string buffer) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::string>();
  std::lock_guard lock(mu);
  kept->push_back(std::move(buffer));
}

// The request buffers of a call that MPI may still be reading: handed to
// abandon() when the call leaves by an exception (a peer died, a send
// failed), released with the call otherwise.
class InFlight {
 public:
  explicit InFlight(std::vector<std::string>& requests) : requests_(requests) {}
  ~InFlight() {
    if (!landed_) {
      for (size_t i : sent_) abandon(std::move(requests_[i]));
    }
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  void add(size_t i) { sent_.push_back(i); }
  void landed() { landed_ = true; }

 private:
  std::vector<std::string>& requests_;
  std::vector<size_t> sent_;
  bool landed_ = false;
};

// The byte encoding of requests and answers (tasks of one job share the
// byte order and the type sizes).
class Writer {
 public:
  Writer() { buf_.resize(kLengthBytes); }
  void u8(uint8_t v) { put(&v, 1); }
  void i32(int32_t v) { put(&v, 4); }
  void i64(int64_t v) { put(&v, 8); }
  void f64(double v) { put(&v, 8); }
  void str(const std::string& s) {
    i64(static_cast<int64_t>(s.size()));
    put(s.data(), s.size());
  }
  void keys(std::span<const int64_t> k) {
    i64(static_cast<int64_t>(k.size()));
    put(k.data(), k.size() * sizeof(int64_t));
  }
  void members(const std::vector<int>& m) {
    i32(static_cast<int32_t>(m.size()));
    for (int x : m) i32(x);
  }
  // A host copy of `t` (invalid: a marker).
  void tensor(const Tensor& t) {
    if (!t.valid()) {
      i32(-1);
      return;
    }
    const Tensor h = t.to_host();
    shape_of(h.dtype(), h.shape());
    put(h.raw_data(), h.nbytes());
  }
  // The rows `positions` of host tensor `all` (axis 0), as tensor() writes
  // gather_rows(all, positions), without that copy. `all` whole when
  // `whole` (the positions are every row, in order).
  void rows_of(const Tensor& all, const std::vector<int64_t>& positions, bool whole) {
    if (whole) return tensor(all);
    const auto n = static_cast<int64_t>(positions.size());
    shape_of(all.dtype(), TensorShape({n}).concatenate(all.shape().tail(1)));
    const int64_t rows = all.shape().dim(0);
    const size_t row = rows == 0 ? 0 : all.nbytes() / static_cast<size_t>(rows);
    const auto* src = static_cast<const char*>(all.raw_data());
    const size_t at = buf_.size();
    buf_.resize(at + row * positions.size());
    for (size_t i = 0; i < positions.size(); ++i) {
      std::memcpy(buf_.data() + at + i * row, src + static_cast<size_t>(positions[i]) * row, row);
    }
  }
  void rows(const KeyedTable::Export& e) {
    tensor(e.keys);
    i32(static_cast<int32_t>(e.values.size()));
    for (const Tensor& v : e.values) tensor(v);
    tensor(e.versions);
    tensor(e.counts);
  }
  // The message: its length set, padded to whole units.
  std::string take() {
    const auto length = static_cast<int64_t>(buf_.size());
    std::memcpy(buf_.data(), &length, kLengthBytes);
    buf_.resize((buf_.size() + kUnit - 1) / kUnit * kUnit, '\0');
    return std::move(buf_);
  }

 private:
  void shape_of(DType dtype, const TensorShape& shape) {
    i32(static_cast<int32_t>(dtype));
    i32(static_cast<int32_t>(shape.rank()));
    for (int d = 0; d < shape.rank(); ++d) i64(shape.dim(d));
    // The elements follow: room for them at once.
    buf_.reserve(buf_.size() + static_cast<size_t>(shape.num_elements()) * dtype_size(dtype) +
                 kUnit);
  }
  void put(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(const std::string& message) {
    int64_t length = 0;
    if (message.size() >= kLengthBytes) std::memcpy(&length, message.data(), kLengthBytes);
    if (length < static_cast<int64_t>(kLengthBytes) ||
        length > static_cast<int64_t>(message.size())) {
      throw InternalError("keyed service: malformed message of " + std::to_string(message.size()) +
                          " bytes");
    }
    p_ = message.data() + kLengthBytes;
    end_ = message.data() + length;
  }
  uint8_t u8() { return get<uint8_t>(); }
  int32_t i32() { return get<int32_t>(); }
  int64_t i64() { return get<int64_t>(); }
  double f64() { return get<double>(); }
  std::string str() {
    const auto n = count(1);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  std::vector<int64_t> keys() {
    const auto n = count(sizeof(int64_t));
    std::vector<int64_t> k(n);
    bytes(k.data(), n * sizeof(int64_t));
    return k;
  }
  std::vector<int> members() {
    const int32_t n = i32();
    std::vector<int> m;
    for (int32_t i = 0; i < n; ++i) m.push_back(i32());
    return m;
  }
  Tensor tensor() {
    const int32_t dtype = i32();
    if (dtype < 0) return Tensor();
    const int32_t rank = i32();
    std::vector<int64_t> dims;
    for (int32_t d = 0; d < rank; ++d) dims.push_back(i64());
    Tensor t(static_cast<DType>(dtype), TensorShape(std::move(dims)), host());
    bytes(t.raw_data(), t.nbytes());
    return t;
  }
  KeyedTable::Export rows() {
    KeyedTable::Export e;
    e.keys = tensor();
    const int32_t n = i32();
    for (int32_t i = 0; i < n; ++i) e.values.push_back(tensor());
    e.versions = tensor();
    e.counts = tensor();
    return e;
  }

 private:
  template <typename T>
  T get() {
    T v;
    bytes(&v, sizeof(T));
    return v;
  }
  size_t count(size_t each) {
    const int64_t n = i64();
    if (n < 0 || static_cast<uint64_t>(n) * each > static_cast<size_t>(end_ - p_)) malformed();
    return static_cast<size_t>(n);
  }
  void bytes(void* out, size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) malformed();
    if (n > 0) std::memcpy(out, p_, n);
    p_ += n;
  }
  [[noreturn]] static void malformed() {
    throw InternalError("keyed service: a message ends before its contents");
  }
  const char* p_ = nullptr;
  const char* end_ = nullptr;
};

void write_hyper(Writer& w, const kernels::TrainingHyper& h) {
  for (double v : {h.lr, h.beta1, h.beta2, h.beta1_power, h.beta2_power, h.epsilon, h.momentum,
                   h.rho, h.l1, h.l2, h.l2_shrinkage, h.lr_power}) {
    w.f64(v);
  }
  w.u8(h.use_nesterov ? 1 : 0);
}

kernels::TrainingHyper read_hyper(Reader& r) {
  kernels::TrainingHyper h;
  for (double* v : {&h.lr, &h.beta1, &h.beta2, &h.beta1_power, &h.beta2_power, &h.epsilon,
                    &h.momentum, &h.rho, &h.l1, &h.l2, &h.l2_shrinkage, &h.lr_power}) {
    *v = r.f64();
  }
  h.use_nesterov = r.u8() != 0;
  return h;
}

std::string status_reply(Status status, ErrorCode code, const std::string& message) {
  Writer w;
  w.u8(static_cast<uint8_t>(status));
  w.i32(static_cast<int32_t>(code));
  w.str(message);
  return w.take();
}

// An answer's payload, after its status.
Reader payload(const std::string& reply) {
  Reader r(reply);
  r.u8();
  return r;
}

Status status_of(const std::string& reply) {
  return static_cast<Status>(static_cast<uint8_t>(reply.at(kLengthBytes)));
}

}  // namespace

// A shard this task holds: its table and how many members (the variable,
// then its slots) this task has created.
struct KeyedService::Shard {
  std::shared_ptr<DeviceKeyedTable> table;
  std::atomic<int> members{0};
  // The members initialized (kept by the first owner).
  std::mutex mu;
  std::vector<bool> initialized;
};

// ---------------------------------------------------------------------------
// The table every task sees

namespace {

class RemoteKeyedTable final : public KeyedTable {
 public:
  RemoteKeyedTable(std::shared_ptr<KeyedService> service, int64_t id, std::string name,
                   DType key_dtype, KeyedPolicy policy, std::vector<int> owners,
                   std::shared_ptr<KeyedService::Shard> mine)
      : KeyedTable(name, key_dtype, policy),
        service_(std::move(service)),
        id_(id),
        owners_(std::move(owners)),
        mine_(std::move(mine)),
        template_(std::make_unique<DeviceKeyedTable>(std::move(name), key_dtype, host(), policy)),
        owner_generations_(owners_.size(), 0) {}

  Device& device() const override { return host(); }
  std::vector<Device*> devices() const override { return {&host()}; }
  bool remote() const override { return true; }

  int add_member(std::string op_name, DType dtype, TensorShape row_shape,
                 KeyedRowInit init) override {
    const int member = template_->add_member(op_name, dtype, row_shape, init);
    if (mine_) {
      mine_->table->add_member(std::move(op_name), dtype, std::move(row_shape), std::move(init));
      mine_->members.store(member + 1);
    }
    return member;
  }

  int64_t size() const override { return sum(Op::kSize); }
  int64_t step() const override {
    std::vector<std::string> requests(owners_.size());
    requests[0] = head(Op::kStep).take();
    return payload(ask(requests)[0]).i64();
  }
  // One way: nothing waits for the owners (they count it before this
  // task's next request, which reaches them after it).
  void tick() override {
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) requests.push_back(head(Op::kTick).take());
    service_->post(name(), owners_, requests);
  }
  int64_t expire() override { return sum(Op::kExpire); }
  void reserve(int64_t rows) override {
    const auto count = static_cast<int64_t>(owners_.size());
    const int64_t each = (rows + count - 1) / count;
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kReserve);
      w.i64(each + each / 8);
      requests.push_back(w.take());
    }
    ask(requests);
  }
  int64_t memory_bytes() const override { return sum(Op::kMemory); }
  DType dtype(int member) const override { return template_->dtype(member); }
  const TensorShape& row_shape(int member) const override { return template_->row_shape(member); }
  const std::string& member_name(int member) const override {
    return template_->member_name(member);
  }
  uint64_t version(int member) const override {
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kVersion);
      w.i32(member);
      requests.push_back(w.take());
    }
    uint64_t v = 0;
    for (const std::string& reply : ask(requests)) v += static_cast<uint64_t>(payload(reply).i64());
    return v;
  }

  Tensor gather(int member, std::span<const int64_t> keys, bool insert,
                const Tensor& absent_row) override {
    const KeySplit parts = split_keys(keys, static_cast<int64_t>(owners_.size()));
    const std::vector<std::string> replies =
        ask_inserting(parts, /*admit=*/true, /*every_owner=*/false, [&](size_t s, bool room) {
          Writer w = head(Op::kGather);
          w.u8(room || !insert ? 1 : 0);
          w.i32(member);
          w.u8(insert ? 1 : 0);
          w.keys(parts.keys[s]);
          w.tensor(absent_row);
          return w.take();
        });
    const TensorShape shape =
        TensorShape({static_cast<int64_t>(keys.size())}).concatenate(row_shape(member));
    // Every key with one owner (always so for a table on one task): its
    // rows as they came.
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (!keys.empty() && parts.keys[s].size() == keys.size()) return payload(replies[s]).tensor();
    }
    Tensor out(dtype(member), shape, host());
    const size_t row = keys.empty() ? 0 : out.nbytes() / keys.size();
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (parts.keys[s].empty()) continue;
      const Tensor rows = payload(replies[s]).tensor();
      const auto* src = static_cast<const std::byte*>(rows.raw_data());
      auto* dst = static_cast<std::byte*>(out.raw_data());
      for (size_t i = 0; i < parts.positions[s].size(); ++i) {
        std::memcpy(dst + static_cast<size_t>(parts.positions[s][i]) * row, src + i * row, row);
      }
    }
    return out;
  }

  void scatter(kernels::ScatterOp op, int member, std::span<const int64_t> keys,
               const Tensor& updates, const std::string& who) override {
    const KeySplit parts = split_keys(keys, static_cast<int64_t>(owners_.size()));
    const Tensor all = updates.to_host();
    ask_inserting(parts, /*admit=*/true, /*every_owner=*/false, [&](size_t s, bool room) {
      Writer w = head(Op::kScatter);
      w.u8(room ? 1 : 0);
      w.i32(static_cast<int32_t>(op));
      w.i32(member);
      w.str(who);
      w.keys(parts.keys[s]);
      w.rows_of(all, parts.positions[s], all.rank() == 0 || parts.keys[s].size() == keys.size());
      return w.take();
    });
  }

  void insert(std::span<const int64_t> keys, const Tensor& values) override {
    const KeySplit parts = split_keys(keys, static_cast<int64_t>(owners_.size()));
    const Tensor all = values.to_host();
    ask_inserting(parts, /*admit=*/false, /*every_owner=*/false, [&](size_t s, bool room) {
      Writer w = head(Op::kInsert);
      w.u8(room ? 1 : 0);
      w.keys(parts.keys[s]);
      w.rows_of(all, parts.positions[s], parts.keys[s].size() == keys.size());
      return w.take();
    });
  }

  int64_t erase(std::span<const int64_t> keys) override {
    const KeySplit parts = split_keys(keys, static_cast<int64_t>(owners_.size()));
    std::vector<std::string> requests(owners_.size());
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (parts.keys[s].empty()) continue;
      Writer w = head(Op::kErase);
      w.keys(parts.keys[s]);
      requests[s] = w.take();
    }
    int64_t n = 0;
    const std::vector<std::string> replies = ask(requests);
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (!replies[s].empty()) n += payload(replies[s]).i64();
    }
    return n;
  }

  void clear() override { every(Op::kClear); }

  void reset_member(int member) override {
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kResetMember);
      w.i32(member);
      requests.push_back(w.take());
    }
    ask(requests);
  }

  void update_rows(const std::vector<int>&, std::span<const int64_t>, bool,
                   const RowsFn&) override {
    throw InternalError(quoted(name()) +
                        " is held by cluster tasks: its training steps go through train()");
  }

  void train(const std::vector<int>& members, std::span<const int64_t> keys, bool all_rows,
             const KeyedTrainingStep& step) override {
    const KeySplit parts = split_keys(keys, static_cast<int64_t>(owners_.size()));
    const Tensor values = step.values.to_host();
    // Every owner counts the step, with keys or not.
    ask_inserting(parts, /*admit=*/true, /*every_owner=*/true, [&](size_t s, bool room) {
      Writer w = head(Op::kTrain);
      w.u8(room ? 1 : 0);
      w.members(members);
      w.u8(all_rows ? 1 : 0);
      w.i32(static_cast<int32_t>(step.op));
      write_hyper(w, step.hyper);
      w.u8(step.deterministic ? 1 : 0);
      w.str(step.who);
      w.keys(parts.keys[s]);
      w.rows_of(values, parts.positions[s], parts.keys[s].size() == keys.size());
      return w.take();
    });
  }

  Export export_rows(const std::vector<int>& members) const override {
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kExport);
      w.members(members);
      requests.push_back(w.take());
    }
    std::vector<Export> parts;
    for (const std::string& reply : ask(requests)) parts.push_back(payload(reply).rows());
    if (parts.size() == 1) return std::move(parts.front());
    return merge_exports(parts, members.size(), tracking());
  }

  void set_update_history(const Tensor& keys, const Tensor& versions,
                          const Tensor& counts) override {
    const std::vector<int64_t> k = keys.to_vector<int64_t>();
    const KeySplit parts = split_keys(k, static_cast<int64_t>(owners_.size()));
    const Tensor v = versions.to_host(), c = counts.to_host();
    std::vector<std::string> requests(owners_.size());
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (parts.keys[s].empty()) continue;
      Writer w = head(Op::kSetHistory);
      w.tensor(Tensor::from_vector(parts.keys[s]));
      w.rows_of(v, parts.positions[s], false);
      w.rows_of(c, parts.positions[s], false);
      requests[s] = w.take();
    }
    ask(requests);
  }

  void replace(const Tensor& keys, const std::vector<int>& members,
               const std::vector<Tensor>& values) override {
    const std::vector<int64_t> k = keys.to_vector<int64_t>();
    const KeySplit parts = split_keys(k, static_cast<int64_t>(owners_.size()));
    // The cap checked here first, so that no owner changes when the keys
    // do not fit.
    if (policy().max_rows > 0 && static_cast<int64_t>(k.size()) > policy().max_rows) {
      throw ResourceExhaustedError(quoted(name()) + ": restoring " + std::to_string(k.size()) +
                                   " keys into a table capped at max_rows " +
                                   std::to_string(policy().max_rows));
    }
    std::vector<Tensor> host_values;
    for (const Tensor& v : values) host_values.push_back(v.to_host());
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kReplace);
      w.tensor(Tensor::from_vector(parts.keys[s]));
      w.members(members);
      for (const Tensor& v : host_values) w.rows_of(v, parts.positions[s], false);
      requests.push_back(w.take());
    }
    ask(requests);
  }

  void write_present(int member, std::span<const int64_t> keys, const Tensor& rows) override {
    const KeySplit parts = split_keys(keys, static_cast<int64_t>(owners_.size()));
    const Tensor all = rows.to_host();
    std::vector<std::string> requests(owners_.size());
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (parts.keys[s].empty()) continue;
      Writer w = head(Op::kWritePresent);
      w.i32(member);
      w.keys(parts.keys[s]);
      w.rows_of(all, parts.positions[s], false);
      requests[s] = w.take();
    }
    ask(requests);
  }

  void start_marking() override { every(Op::kStartMarking); }

  Changes take_changes(const std::vector<int>& members, uint64_t last) override {
    std::lock_guard lock(take_mu_);
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kTakeChanges);
      w.members(members);
      w.i64(static_cast<int64_t>(owner_generations_[s]));
      requests.push_back(w.take());
    }
    const std::vector<std::string> replies = ask(requests);
    std::vector<Changes> parts;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Reader r = payload(replies[s]);
      Changes c;
      c.complete = r.u8() != 0;
      c.generation = static_cast<uint64_t>(r.i64());
      c.written = r.rows();
      c.erased = r.keys();
      owner_generations_[s] = c.generation;
      parts.push_back(std::move(c));
    }
    const bool complete = last == generation_;
    return join_changes(parts, complete, ++generation_, members.size(), tracking());
  }

  Tensor initial_rows(int member, std::span<const int64_t> keys) const override {
    return template_->initial_rows(member, keys);
  }

  // Kept by the first owner.
  bool initialized(int member) const override {
    std::vector<std::string> requests(owners_.size());
    Writer w = head(Op::kInitialized);
    w.i32(member);
    requests[0] = w.take();
    return payload(ask(requests)[0]).u8() != 0;
  }
  void set_initialized(int member) override {
    std::vector<std::string> requests(owners_.size());
    Writer w = head(Op::kSetInitialized);
    w.i32(member);
    requests[0] = w.take();
    ask(requests);
  }

 private:
  Writer head(Op op) const {
    Writer w;
    w.u8(static_cast<uint8_t>(op));
    w.i64(id_);
    w.i32(0);  // the reply tag, set when sent
    return w;
  }
  std::vector<std::string> ask(std::vector<std::string>& requests) const {
    return service_->call(name(), owners_, requests);
  }
  std::vector<std::string> ask(std::vector<std::string>&& requests) const { return ask(requests); }
  // The op (no arguments) on every owner.
  std::vector<std::string> every(Op op) const {
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) requests.push_back(head(op).take());
    return ask(requests);
  }
  int64_t sum(Op op) const {
    int64_t n = 0;
    for (const std::string& reply : every(op)) n += payload(reply).i64();
    return n;
  }
  // A call that may insert keys: `make(s, room)` builds owner s's request
  // (for the owners with keys, or every owner). Under a cap, with several
  // owners, the requests first go out without room made: an owner with
  // nothing to insert does its part at once (one exchange, the common case
  // once the keys are known), one that would insert answers kNeedsRoom and
  // does nothing; then make_room() evicts over all owners and those are
  // asked again. The answers, by owner.
  std::vector<std::string> ask_inserting(const KeySplit& parts, bool admit, bool every_owner,
                                         const std::function<std::string(size_t, bool)>& make) {
    const bool capped = policy().max_rows > 0 && owners_.size() > 1;
    std::vector<std::string> requests(owners_.size());
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (every_owner || !parts.keys[s].empty()) requests[s] = make(s, !capped);
    }
    std::vector<std::string> replies = ask(requests);
    if (!capped) return replies;
    std::vector<std::string> again(owners_.size());
    bool refused = false;
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (replies[s].empty() || status_of(replies[s]) != Status::kNeedsRoom) continue;
      again[s] = make(s, true);
      refused = true;
    }
    if (!refused) return replies;
    make_room(parts, admit);
    std::vector<std::string> more = ask(again);
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (!again[s].empty()) replies[s] = std::move(more[s]);
    }
    return replies;
  }

  // Before a call that may insert `parts` (admitting with `admit`): under
  // a cap, with several owners, evicts the keys the whole table would (the
  // least recently or frequently updated outside the call's keys, over
  // every owner), so that every owner then has room; ResourceExhaustedError,
  // nothing changed, when the new keys cannot fit. One exchange with every
  // owner (its live keys, and how many of its keys this call would insert),
  // two more when keys must go. (One owner: its own cap does all this, in
  // the same lock as the insert.)
  void make_room(const KeySplit& parts, bool admit) {
    const int64_t cap = policy().max_rows;
    if (cap <= 0 || owners_.size() < 2) return;
    std::vector<std::string> requests;
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kRoom);
      w.u8(admit ? 1 : 0);
      w.keys(parts.keys[s]);
      requests.push_back(w.take());
    }
    int64_t live = 0, fresh = 0;
    for (const std::string& reply : ask(requests)) {
      Reader r = payload(reply);
      live += r.i64();
      fresh += r.i64();
    }
    const int64_t over = keys_over_cap(name(), policy(), live, fresh, owners_.size(), "tasks");
    if (over <= 0) return;
    requests.clear();
    for (size_t s = 0; s < owners_.size(); ++s) {
      Writer w = head(Op::kCandidates);
      w.keys(parts.keys[s]);
      w.i64(over);
      requests.push_back(w.take());
    }
    std::vector<std::vector<std::pair<int64_t, int64_t>>> candidates(owners_.size());
    const std::vector<std::string> replies = ask(requests);
    for (size_t s = 0; s < owners_.size(); ++s) {
      Reader r = payload(replies[s]);
      for (int64_t n = r.i64(); n > 0; --n) {
        const int64_t metric = r.i64();
        candidates[s].emplace_back(metric, r.i64());
      }
    }
    const std::vector<std::vector<int64_t>> evict =
        pick_victims(name(), policy(), live, fresh, "tasks", candidates, over);
    requests.assign(owners_.size(), std::string());
    for (size_t s = 0; s < owners_.size(); ++s) {
      if (evict[s].empty()) continue;
      Writer w = head(Op::kErase);
      w.keys(evict[s]);
      requests[s] = w.take();
    }
    ask(requests);
  }

  const std::shared_ptr<KeyedService> service_;
  const int64_t id_;
  const std::vector<int> owners_;
  const std::shared_ptr<KeyedService::Shard> mine_;  // this task's shard, if any
  // The members' dtypes, shapes, names and initial rows; holds no keys.
  const std::unique_ptr<DeviceKeyedTable> template_;
  std::mutex take_mu_;
  uint64_t generation_ = 0;
  std::vector<uint64_t> owner_generations_;
};

}  // namespace

// ---------------------------------------------------------------------------
// The service

KeyedService::KeyedService(std::shared_ptr<MpiContext> context, int rank)
    : context_(std::move(context)), rank_(rank) {
  std::lock_guard lock(context_->mu);
  MPI_Comm_dup(context_->comm, &requests_);
  MPI_Comm_dup(context_->comm, &replies_);
  MPI_Comm_set_errhandler(requests_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(replies_, MPI_ERRORS_RETURN);
  MPI_Type_contiguous(static_cast<int>(kUnit), MPI_BYTE, &unit_);
  MPI_Type_commit(&unit_);
  int* limit = nullptr;
  int found = 0;
  MPI_Comm_get_attr(replies_, MPI_TAG_UB, &limit, &found);
  if (found && limit != nullptr) tag_limit_ = *limit;
}

KeyedService::~KeyedService() { stop(/*free_comms=*/false); }

const std::string& KeyedService::task_name(int rank) const {
  return context_->task_names.at(static_cast<size_t>(rank));
}

std::shared_ptr<KeyedTable> KeyedService::make_table(const std::string& name, DType key_dtype,
                                                     const std::vector<int>& owners,
                                                     KeyedPolicy policy) {
  const int64_t id = tables_++;
  const auto count = static_cast<int64_t>(owners.size());
  std::shared_ptr<Shard> mine;
  for (size_t s = 0; s < owners.size(); ++s) {
    if (owners[s] != rank_) continue;
    mine = std::make_shared<Shard>();
    const std::string shard_name = count == 1 ? name
                                              : name + " (shard " + std::to_string(s) + " of " +
                                                    std::to_string(count) + ", on " +
                                                    task_name(owners[s]) + ")";
    // A cap holds each owner's keys under it too (RemoteKeyedTable::
    // make_room keeps them all under it together).
    mine->table = std::make_shared<DeviceKeyedTable>(shard_name, key_dtype, host(), policy);
    hold(id, mine);
  }
  return std::make_shared<RemoteKeyedTable>(shared_from_this(), id, name, key_dtype, policy, owners,
                                            mine);
}

void KeyedService::hold(int64_t id, std::shared_ptr<Shard> shard) {
  std::lock_guard lock(mu_);
  held_[id] = std::move(shard);
  if (!thread_.joinable() && !stop_.load()) thread_ = std::thread([this] { run(); });
}

void KeyedService::stop(bool free_comms) {
  stop_.store(true);
  std::thread thread;
  {
    std::lock_guard lock(mu_);  // (the thread takes mu_ too: joined outside it)
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
  if (stopped_.exchange(true)) return;
  if (!free_comms) return;
  std::lock_guard lock(context_->mu);
  MPI_Comm_free(&requests_);
  MPI_Comm_free(&replies_);
  MPI_Type_free(&unit_);
}

int KeyedService::next_tag() { return 1 + tag_.fetch_add(1) % (tag_limit_ - 1); }

void KeyedService::run() {
  std::string request;
  for (int idle = 1; !stop_.load();) {
    int found = 0;
    MPI_Status status;
    {
      std::lock_guard lock(context_->mu);
      if (!context_->alive) return;
      MPI_Message message;
      if (MPI_Improbe(MPI_ANY_SOURCE, kRequestTag, requests_, &found, &message, &status) !=
          MPI_SUCCESS) {
        found = 0;
      }
      if (found) {
        int units = 0;
        MPI_Get_count(&status, unit_, &units);
        request.assign(static_cast<size_t>(units) * kUnit, '\0');
        MPI_Mrecv(request.data(), units, unit_, &message, MPI_STATUS_IGNORE);
      }
    }
    if (!found) {
      pause(idle++);
      continue;
    }
    idle = 1;
    int tag = 0;
    if (request.size() >= kTagOffset + 4) std::memcpy(&tag, request.data() + kTagOffset, 4);
    if (tag == kOneWay) {
      handle_one_way(request);
      continue;
    }
    send_reply(handle(request), status.MPI_SOURCE, tag);
  }
}

void KeyedService::send_reply(std::string reply, int dest, int tag) {
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(context_->mu);
    if (MPI_Isend(reply.data(), static_cast<int>(reply.size() / kUnit), unit_, dest, tag, replies_,
                  &request) != MPI_SUCCESS) {
      return;  // the caller sees its owner fail or die
    }
  }
  for (int polls = 1;; ++polls) {
    int done = 0;
    {
      std::lock_guard lock(context_->mu);
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    if (done) return;
    bool give_up = stop_.load();
    if (!give_up && polls % kLivenessPolls == 0) {
      try {
        check_peer_alive(*context_, dest, /*thorough=*/false);
      } catch (const UnavailableError&) {
        give_up = true;
      }
    }
    if (give_up) {
      abandon(std::move(reply));
      return;
    }
    pause(polls);
  }
}

void KeyedService::handle_one_way(const std::string& request) {
  // No one waits for an answer: a table (or slot) this task has not created
  // yet is waited for here, so that the caller's later requests still come
  // after it.
  const auto give_up_at = std::chrono::steady_clock::now() + kNotReadyFor;
  for (;;) {
    const std::string reply = handle(request);
    const Status status = status_of(reply);
    if (status == Status::kOk) return;
    if (status == Status::kNotReady && std::chrono::steady_clock::now() < give_up_at &&
        !stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    Reader r = payload(reply);
    r.i32();
    std::fprintf(stderr, "varstate: %s: a one-way request was dropped: %s\n",
                 task_name(rank_).c_str(), r.str().c_str());
    return;
  }
}

void KeyedService::post(const std::string& table, const std::vector<int>& owners,
                        std::vector<std::string>& requests) {
  check_running(table, owners.front());
  std::vector<std::pair<size_t, MPI_Request>> sends;
  InFlight in_flight(requests);
  for (size_t i = 0; i < owners.size(); ++i) {
    if (requests[i].empty() || owners[i] == rank_) continue;
    sends.emplace_back(i, send_request(table, owners[i], requests[i], kOneWay));
    in_flight.add(i);
  }
  for (size_t i = 0; i < owners.size(); ++i) {
    if (!requests[i].empty() && owners[i] == rank_) handle_one_way(requests[i]);
  }
  // Small messages leave at once; the buffers stay until they have.
  for (int polls = 1; !sends.empty(); ++polls) {
    {
      std::lock_guard lock(context_->mu);
      for (size_t k = 0; k < sends.size();) {
        int done = 0;
        MPI_Test(&sends[k].second, &done, MPI_STATUS_IGNORE);
        if (done) {
          sends[k] = sends.back();
          sends.pop_back();
        } else {
          ++k;
        }
      }
    }
    if (sends.empty()) break;
    if (polls % kLivenessPolls == 0) {
      for (const auto& [i, send] : sends) check_alive(table, owners[i]);
    }
    pause(polls);
  }
  in_flight.landed();
}

void KeyedService::check_running(const std::string& table, int owner) const {
  if (stopped_.load() || stop_.load()) {
    throw UnavailableError(quoted(table) + " is held by " + task_name(owner) +
                           ": the Cluster has shut down");
  }
}

MPI_Request KeyedService::send_request(const std::string& table, int owner, std::string& request,
                                       int tag) {
  std::memcpy(request.data() + kTagOffset, &tag, 4);
  MPI_Request send = MPI_REQUEST_NULL;
  std::lock_guard lock(context_->mu);
  const int rc = MPI_Isend(request.data(), static_cast<int>(request.size() / kUnit), unit_, owner,
                           kRequestTag, requests_, &send);
  if (rc != MPI_SUCCESS) {
    throw UnavailableError("sending a request for " + quoted(table) + " to " + task_name(owner) +
                           " failed: " + mpi_error_string(rc));
  }
  context_->data_bytes += request.size();
  return send;
}

void KeyedService::check_alive(const std::string& table, int owner) {
  try {
    check_peer_alive(*context_, owner, /*thorough=*/false);
  } catch (const UnavailableError& e) {
    throw UnavailableError("a request for " + quoted(table) + " on " + task_name(rank_) + ": " +
                           e.what());
  }
}

std::string KeyedService::handle(const std::string& request) {
  try {
    Reader in(request);
    const auto op = static_cast<Op>(in.u8());
    const int64_t id = in.i64();
    in.i32();  // the reply tag
    std::shared_ptr<Shard> shard;
    {
      std::lock_guard lock(mu_);
      if (auto it = held_.find(id); it != held_.end()) shard = it->second;
    }
    auto not_ready = [&](const std::string& what) {
      return status_reply(Status::kNotReady, ErrorCode::kFailedPrecondition, what);
    };
    if (!shard)
      return not_ready("it has not created the table (dynamic variable number " +
                       std::to_string(id) + ")");
    auto lacks = [&](const std::vector<int>& members) {
      for (int m : members) {
        if (m < 0 || m >= shard->members.load()) return true;
      }
      return false;
    };
    auto lacks_one = [&](int member) { return lacks({member}); };
    // A call sent before room was made (capped, several owners) that would
    // insert keys here: refused, nothing done.
    const auto would_insert = [](const DeviceKeyedTable& table, const std::vector<int64_t>& keys,
                                 bool admit) {
      return !keys.empty() && table.count_new(keys, admit) > 0;
    };
    const auto needs_room = [] {
      return status_reply(Status::kNeedsRoom, ErrorCode::kResourceExhausted, "");
    };
    const auto lacking = [&] { return not_ready("it has not created that slot of the table yet"); };
    DeviceKeyedTable& t = *shard->table;
    Writer out;
    out.u8(static_cast<uint8_t>(Status::kOk));
    switch (op) {
      case Op::kSize:
        out.i64(t.size());
        break;
      case Op::kStep:
        out.i64(t.step());
        break;
      case Op::kTick:
        t.tick();
        break;
      case Op::kExpire:
        out.i64(t.expire());
        break;
      case Op::kReserve:
        t.reserve(in.i64());
        break;
      case Op::kMemory:
        out.i64(t.memory_bytes());
        break;
      case Op::kVersion: {
        const int member = in.i32();
        if (lacks_one(member)) return lacking();
        out.i64(static_cast<int64_t>(t.version(member)));
        break;
      }
      case Op::kGather: {
        const bool room = in.u8() != 0;
        const int member = in.i32();
        const bool insert = in.u8() != 0;
        const std::vector<int64_t> keys = in.keys();
        const Tensor absent_row = in.tensor();
        if (lacks_one(member)) return lacking();
        if (!room && would_insert(t, keys, true)) return needs_room();
        out.tensor(t.gather(member, keys, insert, absent_row));
        break;
      }
      case Op::kScatter: {
        const bool room = in.u8() != 0;
        const auto scatter_op = static_cast<kernels::ScatterOp>(in.i32());
        const int member = in.i32();
        const std::string who = in.str();
        const std::vector<int64_t> keys = in.keys();
        const Tensor updates = in.tensor();
        if (lacks_one(member)) return lacking();
        if (!room && would_insert(t, keys, true)) return needs_room();
        t.scatter(scatter_op, member, keys, updates, who);
        break;
      }
      case Op::kInsert: {
        const bool room = in.u8() != 0;
        const std::vector<int64_t> keys = in.keys();
        if (!room && would_insert(t, keys, false)) return needs_room();
        t.insert(keys, in.tensor());
        break;
      }
      case Op::kErase:
        out.i64(t.erase(in.keys()));
        break;
      case Op::kClear:
        t.clear();
        break;
      case Op::kResetMember: {
        const int member = in.i32();
        if (lacks_one(member)) return lacking();
        t.reset_member(member);
        break;
      }
      case Op::kTrain: {
        const bool room = in.u8() != 0;
        const std::vector<int> members = in.members();
        const bool all_rows = in.u8() != 0;
        KeyedTrainingStep step;
        step.op = static_cast<kernels::TrainingOp>(in.i32());
        step.hyper = read_hyper(in);
        step.deterministic = in.u8() != 0;
        step.who = in.str();
        const std::vector<int64_t> keys = in.keys();
        step.values = in.tensor();
        if (lacks(members)) return lacking();
        if (!room && would_insert(t, keys, true)) return needs_room();
        train_keyed_rows(t, members, keys, all_rows, step);
        break;
      }
      case Op::kExport: {
        const std::vector<int> members = in.members();
        if (lacks(members)) return lacking();
        out.rows(t.export_rows(members));
        break;
      }
      case Op::kSetHistory: {
        const Tensor keys = in.tensor();
        const Tensor versions = in.tensor();
        t.set_update_history(keys, versions, in.tensor());
        break;
      }
      case Op::kReplace: {
        const Tensor keys = in.tensor();
        const std::vector<int> members = in.members();
        std::vector<Tensor> values;
        for (size_t m = 0; m < members.size(); ++m) values.push_back(in.tensor());
        if (lacks(members)) return lacking();
        t.replace(keys, members, values);
        break;
      }
      case Op::kWritePresent: {
        const int member = in.i32();
        const std::vector<int64_t> keys = in.keys();
        const Tensor rows = in.tensor();
        if (lacks_one(member)) return lacking();
        t.write_present(member, keys, rows);
        break;
      }
      case Op::kStartMarking:
        t.start_marking();
        break;
      case Op::kTakeChanges: {
        const std::vector<int> members = in.members();
        const auto last = static_cast<uint64_t>(in.i64());
        if (lacks(members)) return lacking();
        const KeyedTable::Changes c = t.take_changes(members, last);
        out.u8(c.complete ? 1 : 0);
        out.i64(static_cast<int64_t>(c.generation));
        out.rows(c.written);
        out.keys(c.erased);
        break;
      }
      case Op::kInitialized: {
        const auto member = static_cast<size_t>(in.i32());
        std::lock_guard lock(shard->mu);
        out.u8(member < shard->initialized.size() && shard->initialized[member] ? 1 : 0);
        break;
      }
      case Op::kSetInitialized: {
        const auto member = static_cast<size_t>(in.i32());
        std::lock_guard lock(shard->mu);
        if (shard->initialized.size() <= member) shard->initialized.resize(member + 1, false);
        shard->initialized[member] = true;
        break;
      }
      case Op::kRoom: {
        const bool admit = in.u8() != 0;
        const std::vector<int64_t> keys = in.keys();
        out.i64(t.size());
        out.i64(keys.empty() ? 0 : t.count_new(keys, admit));
        break;
      }
      case Op::kCandidates: {
        const std::vector<int64_t> keys = in.keys();
        const auto candidates = t.eviction_candidates(keys, in.i64());
        out.i64(static_cast<int64_t>(candidates.size()));
        for (const auto& [metric, key] : candidates) {
          out.i64(metric);
          out.i64(key);
        }
        break;
      }
      default:
        throw InternalError("keyed service: unknown request " +
                            std::to_string(static_cast<int>(op)));
    }
    return out.take();
  } catch (const Error& e) {
    return status_reply(Status::kError, e.code(), e.what());
  } catch (const std::exception& e) {
    return status_reply(Status::kError, ErrorCode::kInternal, e.what());
  }
}

std::vector<std::string> KeyedService::call(const std::string& table,
                                            const std::vector<int>& owners,
                                            std::vector<std::string>& requests) {
  std::vector<std::string> replies(owners.size());
  std::vector<size_t> pending;
  for (size_t i = 0; i < owners.size(); ++i) {
    if (!requests[i].empty()) pending.push_back(i);
  }
  const auto give_up_at = std::chrono::steady_clock::now() + kNotReadyFor;
  while (!pending.empty()) {
    check_running(table, owners[pending[0]]);
    // Every remote owner's request goes out first; then this task's own
    // part runs here; then the answers are collected.
    struct Flight {
      size_t i;
      MPI_Request send = MPI_REQUEST_NULL;
      int tag = 0;
      bool sent = false, answered = false;
    };
    std::vector<Flight> flights;
    InFlight in_flight(requests);
    for (size_t i : pending) {
      if (owners[i] == rank_) continue;
      Flight f{i};
      f.tag = next_tag();
      f.send = send_request(table, owners[i], requests[i], f.tag);
      in_flight.add(i);
      flights.push_back(f);
    }
    for (size_t i : pending) {
      if (owners[i] == rank_) replies[i] = handle(requests[i]);
    }
    for (int polls = 1; !flights.empty(); ++polls) {
      bool all = true;
      {
        std::lock_guard lock(context_->mu);
        for (Flight& f : flights) {
          int flag = 0;
          if (!f.sent) {
            MPI_Test(&f.send, &flag, MPI_STATUS_IGNORE);
            f.sent = flag != 0;
          }
          if (!f.answered) {
            MPI_Message message;
            MPI_Status status;
            flag = 0;
            MPI_Improbe(owners[f.i], f.tag, replies_, &flag, &message, &status);
            if (flag) {
              int units = 0;
              MPI_Get_count(&status, unit_, &units);
              replies[f.i].assign(static_cast<size_t>(units) * kUnit, '\0');
              MPI_Mrecv(replies[f.i].data(), units, unit_, &message, MPI_STATUS_IGNORE);
              context_->data_bytes += replies[f.i].size();
              f.answered = true;
            }
          }
          all = all && f.sent && f.answered;
        }
      }
      if (all) break;
      if (polls % kLivenessPolls == 0) {
        for (const Flight& f : flights) {
          if (!f.answered) check_alive(table, owners[f.i]);
        }
      }
      pause(polls);
    }
    in_flight.landed();
    context_->exchanges += flights.size();
    // Owners that have not created the table (or slot) yet are asked again.
    std::vector<size_t> again;
    for (size_t i : pending) {
      if (status_of(replies[i]) == Status::kNotReady) again.push_back(i);
    }
    if (!again.empty() && std::chrono::steady_clock::now() > give_up_at) {
      Reader r = payload(replies[again[0]]);
      r.i32();
      throw FailedPreconditionError(
          quoted(table) + " on " + task_name(owners[again[0]]) + ": " + r.str() +
          " after 60 s; every task must create the same dynamic variables and slots, in the "
          "same order");
    }
    if (!again.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pending = std::move(again);
  }
  for (const std::string& reply : replies) {
    if (!reply.empty() && status_of(reply) == Status::kError) {
      Reader r = payload(reply);
      const auto code = static_cast<ErrorCode>(r.i32());
      throw_error(code, r.str());
    }
  }
  return replies;
}

}  // namespace varstate::internal
