// The local kind of VariableStorage (runtime/local_storage.h) on what the
// ops reach only through remote storage today: the batch entry of the
// training ops (modify_rows), a restore's rows (replace_rows), the marked
// rows, and for_each_kind's grouping. On the CPU and, as _on_gpu, a GPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "device_fixture.h"
#include "runtime/dirty_rows.h"
#include "runtime/variable_storage.h"
#include "scatter_test_util.h"

using namespace varstate;
using namespace varstate::testing;
using internal::RowsUpdate;
using internal::storage;
using internal::StoragePart;
using internal::VariableStorage;

namespace {

std::vector<float> values_of(const Variable& v) { return v.value().to_host().to_vector<float>(); }

}  // namespace

TEST_CASE_METHOD(FreshGraph, "local storage: what it is", "[variable_storage]") {
  Variable v = initialized_variable(Tensor({{1.f, 2.f}, {3.f, 4.f}}), "v");
  VariableStorage& s = storage(v);
  CHECK(s.updates_in_place());
  CHECK(s.holder() == "this process");
  CHECK(s.shape() == TensorShape({2, 2}));
  CHECK(s.is_initialized());
}

TEST_CASE_METHOD(FreshGraph, "local storage: modify_rows updates rows of a variable and its slot",
                 "[variable_storage]") {
  Variable v = initialized_variable(Tensor({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), "v");
  Variable slot = initialized_variable(Tensor({{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}}), "slot");
  const uint64_t generation = internal::dirty_rows(v).take(3, 0).generation;  // start tracking
  const uint64_t version = v.version();
  std::vector<RowsUpdate> updates(1);
  updates[0].storages = {&storage(v), &storage(slot)};
  updates[0].rows = std::vector<int64_t>{0, 2};
  updates[0].fn = [](std::vector<Tensor>& t) {
    REQUIRE(t.size() == 2);
    CHECK(t[0].shape() == TensorShape({2, 2}));
    CHECK(t[0].to_vector<float>() == std::vector<float>{1, 2, 5, 6});
    t[0].data<float>()[0] = 10;
    t[1].data<float>()[3] = 7;
  };
  storage(v).modify_rows(updates);
  CHECK(values_of(v) == std::vector<float>{10, 2, 3, 4, 5, 6});
  CHECK(values_of(slot) == std::vector<float>{0, 0, 0, 0, 0, 7});
  CHECK(v.version() > version);
  const auto taken = internal::dirty_rows(v).take(3, generation);
  CHECK_FALSE(taken.all);
  CHECK(taken.rows == std::vector<int64_t>{0, 2});
}

TEST_CASE_METHOD(FreshGraph, "local storage: modify_rows writes nothing when an fn throws",
                 "[variable_storage]") {
  Variable a = initialized_variable(Tensor({1.f, 2.f}), "a");
  Variable b = initialized_variable(Tensor({3.f, 4.f}), "b");
  std::vector<RowsUpdate> updates(2);
  updates[0].storages = {&storage(a)};
  updates[0].fn = [](std::vector<Tensor>& t) { t[0].data<float>()[0] = 9; };
  updates[1].storages = {&storage(b)};
  updates[1].fn = [](std::vector<Tensor>&) { throw std::runtime_error("fn failed"); };
  CHECK_THROWS_WITH(storage(a).modify_rows(updates), "fn failed");
  CHECK(values_of(a) == std::vector<float>{1, 2});
  CHECK(values_of(b) == std::vector<float>{3, 4});
  updates.pop_back();
  storage(a).modify_rows(updates);
  CHECK(values_of(a) == std::vector<float>{9, 2});
}

TEST_CASE_METHOD(FreshGraph, "local storage: replace_rows restores every row from host runs",
                 "[variable_storage]") {
  Variable v = initialized_variable(Tensor({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), "v");
  const std::vector<float> first = {7, 8}, rest = {9, 10, 11, 12};
  const std::vector<internal::RowBytes> runs = {
      {1, reinterpret_cast<const std::byte*>(rest.data()), rest.size() * sizeof(float)},
      {0, reinterpret_cast<const std::byte*>(first.data()), first.size() * sizeof(float)}};
  storage(v).replace_rows(v, runs);
  CHECK(values_of(v) == std::vector<float>{7, 8, 9, 10, 11, 12});
  CHECK(&v.ref().device() == &test_device());
}

TEST_CASE_METHOD(FreshGraph, "local storage: take_marked_rows takes the dirty rows",
                 "[variable_storage]") {
  Variable v = initialized_variable(Tensor::zeros(DType::kFloat, {4, 1}), "v");
  // Before any take, every row.
  CHECK(storage(v).take_marked_rows() == std::vector<int64_t>{0, 1, 2, 3});
  scatter_add(v, Tensor::from_vector<int64_t>({2}), Tensor::zeros(DType::kFloat, {1, 1}));
  v.sync();
  CHECK(storage(v).take_marked_rows() == std::vector<int64_t>{2});
}

TEST_CASE_METHOD(FreshGraph, "for_each_kind: one call for parts of one kind, in order",
                 "[variable_storage]") {
  Variable a = initialized_variable(Tensor({1.f}), "a");
  Variable b = initialized_variable(Tensor({2.f}), "b");
  std::vector<StoragePart> parts = {{&storage(a), &a, Tensor(), Tensor()},
                                    {&storage(b), &b, Tensor(), Tensor()}};
  int calls = 0;
  internal::for_each_kind(parts, [&](std::vector<StoragePart>& group) {
    ++calls;
    REQUIRE(group.size() == 2);
    CHECK(group[0].variable == &a);
    CHECK(group[1].variable == &b);
    group[1].values = Tensor({5.f});
  });
  CHECK(calls == 1);
  CHECK(parts[1].values.to_vector<float>() == std::vector<float>{5});
}
