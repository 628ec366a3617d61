#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "device_fixture.h"
#include "runtime/tensor_internal.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"

using namespace varstate;

TEST_CASE("TensorShape basics", "[tensor_shape]") {
  TensorShape s{2, 3};
  CHECK(s.rank() == 2);
  CHECK(s.num_elements() == 6);
  CHECK(s.to_string() == "[2,3]");
  CHECK(TensorShape{}.to_string() == "[]");
  CHECK(TensorShape{}.num_elements() == 1);
  TensorShape partial{-1, 3};
  CHECK(partial.to_string() == "[?,3]");
  CHECK_FALSE(partial.is_fully_defined());
  CHECK_THROWS_AS(partial.num_elements(), ValueError);
  CHECK(partial.is_compatible_with(s));
  CHECK_FALSE(partial.is_compatible_with(TensorShape{2, 4}));
  CHECK(TensorShape::unknown().to_string() == "<unknown>");
  CHECK(TensorShape::unknown().is_compatible_with(s));
  CHECK(TensorShape::unknown().rank() == -1);
  CHECK(s == TensorShape({2, 3}));
  CHECK(s != TensorShape({3, 2}));
  CHECK(s.tail(1) == TensorShape{3});
  CHECK(s.concatenate(TensorShape{4}) == TensorShape({2, 3, 4}));
  CHECK_THROWS_AS(s.dim(2), OutOfRangeError);
  CHECK_THROWS_AS(TensorShape({2, -5}), ValueError);
  CHECK(TensorShape{0, 5}.num_elements() == 0);
}

TEST_CASE("tensors from scalars, vectors and nested lists", "[tensor]") {
  Tensor f = 1.5f;
  CHECK(f.dtype() == DType::kFloat);
  CHECK(f.shape().is_scalar());
  CHECK(f.scalar<float>() == 1.5f);

  Tensor i64 = int64_t{1} << 40;
  CHECK(i64.dtype() == DType::kInt64);
  CHECK(i64.scalar<int64_t>() == int64_t{1} << 40);

  Tensor b = true;
  CHECK(b.dtype() == DType::kBool);

  Tensor s = "hello";
  CHECK(s.dtype() == DType::kString);
  CHECK(s.scalar<std::string>() == "hello");

  Tensor v({1, 2, 3});
  CHECK(v.dtype() == DType::kInt32);
  CHECK(v.shape() == TensorShape{3});
  CHECK(v.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3});

  Tensor m({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  CHECK(m.dtype() == DType::kDouble);
  CHECK(m.shape() == TensorShape{2, 3});
  CHECK(m.to_vector<double>()[4] == 5.0);

  Tensor c({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  CHECK(c.shape() == TensorShape({2, 2, 2}));
  CHECK(c.to_vector<int32_t>()[7] == 8);

  CHECK_THROWS_AS(Tensor({{1, 2}, {3}}), ValueError);
  CHECK_THROWS_AS(Tensor({{{1}, {2}}, {{3, 4}, {5, 6}}}), ValueError);
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), ValueError);
  CHECK_THROWS_AS(Tensor(DType::kFloat, TensorShape{-1, 2}), ValueError);
  CHECK_THROWS_AS(m.to_vector<float>(), TypeError);
  CHECK_THROWS_AS(v.scalar<int32_t>(), InvalidArgumentError);
}

TEST_CASE("tensor handles share buffers; clone copies", "[tensor]") {
  Tensor a({1.f, 2.f});
  Tensor b = a;
  CHECK(b.shares_buffer_with(a));
  b.data<float>()[0] = 9.f;
  CHECK(a.to_vector<float>()[0] == 9.f);
  Tensor c = a.clone();
  CHECK_FALSE(c.shares_buffer_with(a));
  c.data<float>()[0] = 1.f;
  CHECK(a.to_vector<float>()[0] == 9.f);
  Tensor r = a.reshaped({2, 1});
  CHECK(r.shape() == TensorShape({2, 1}));
  CHECK(r.shares_buffer_with(a));
  CHECK_THROWS_AS(a.reshaped({3}), InvalidArgumentError);
}

TEST_CASE("on(device) shares the buffer on that device; to(device) always copies", "[tensor]") {
  Device& cpu = DeviceManager::instance().cpu();
  Tensor a({1.f, 2.f});
  const Tensor same = a.on(cpu);
  CHECK(same.shares_buffer_with(a));
  const Tensor copy = a.to(cpu);
  CHECK_FALSE(copy.shares_buffer_with(a));
  CHECK(copy.to_vector<float>() == a.to_vector<float>());
  CHECK(a.to_host().shares_buffer_with(a));
  CHECK_FALSE(Tensor().on(cpu).valid());  // an empty handle stays empty
}

TEST_CASE("grow_rows_in_place keeps the rows, only for the sole handle", "[tensor]") {
  // 8,192 rows of 64 floats: a 2 MiB buffer, which the CPU can remap.
  Tensor t(DType::kFloat, {8192, 64});
  std::vector<float> values(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) * 0.5f;
  std::memcpy(t.raw_data(), values.data(), t.nbytes());

  Tensor other = t;  // a second handle: refused, nothing changed
  CHECK_FALSE(internal::grow_rows_in_place(t, 20000));
  CHECK(t.shape() == TensorShape({8192, 64}));
  other = Tensor();
  CHECK_FALSE(internal::grow_rows_in_place(t, 100));  // fewer rows: refused
  Tensor scalar(1.5f);
  CHECK_FALSE(internal::grow_rows_in_place(scalar, 4));
#if defined(__SANITIZE_ADDRESS__)
  CHECK_FALSE(internal::grow_rows_in_place(t, 20000));  // the CPU declines under ASan
#else
  REQUIRE(internal::grow_rows_in_place(t, 20000));
  CHECK(t.shape() == TensorShape({20000, 64}));
  CHECK(t.num_elements() == 20000 * 64);
  CHECK(t.nbytes() == size_t{20000} * 64 * sizeof(float));
  CHECK(std::memcmp(t.raw_data(), values.data(), values.size() * sizeof(float)) == 0);
  static_cast<float*>(t.raw_data())[t.num_elements() - 1] = 7.0f;
  CHECK(t.to_vector<float>().back() == 7.0f);
#endif
}

TEST_CASE("tensors print like NumPy", "[tensor]") {
  CHECK(Tensor({{1.f, 2.f}, {3.f, 4.f}}).to_string() == "[[1. 2.]\n [3. 4.]]");
  CHECK(Tensor({1, 22, 3}).to_string() == "[ 1 22  3]");
  CHECK(Tensor(0.5f).to_string() == "0.5");
  CHECK(Tensor({true, false}).to_string() == "[ True False]");
  CHECK(Tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}).to_string() ==
        "[[[1 2]\n  [3 4]]\n\n [[5 6]\n  [7 8]]]");
  Tensor big = Tensor::zeros(DType::kInt32, {2000});
  CHECK(big.to_string() == "[0 0 0 ... 0 0 0]");
  CHECK(Tensor({1.f}).debug_string() == "Tensor(shape=[1], dtype=float32, device=/device:CPU:0)");
}

TEST_CASE("casts follow tf.cast", "[tensor][cast]") {
  Tensor f({1.7f, -2.5f, 0.f});
  CHECK(f.cast(DType::kInt32).to_vector<int32_t>() == std::vector<int32_t>{1, -2, 0});
  CHECK(f.cast(DType::kBool).to_vector<bool>() == std::vector<bool>{true, true, false});
  auto h = f.cast(DType::kHalf).to_vector<half>();
  CHECK(static_cast<float>(h[1]) == -2.5f);
  auto c = Tensor({3}).cast(DType::kComplex64).to_vector<complex64>();
  CHECK(c[0] == complex64(3, 0));
  CHECK_THROWS_AS(Tensor("x").cast(DType::kFloat), TypeError);
}

TEST_CASE("weakly typed literals convert; tensors do not", "[tensor][cast]") {
  Tensor lit = 1;  // a C++ int literal, like a Python int
  CHECK(lit.weakly_typed());
  Tensor asf = convert_to_dtype(lit, DType::kFloat, "test");
  CHECK(asf.dtype() == DType::kFloat);
  CHECK(asf.scalar<float>() == 1.f);
  CHECK_THROWS_AS(convert_to_dtype(Tensor(1.5), DType::kInt32, "test"), TypeError);
  Tensor strong = lit.cast(DType::kInt64);
  CHECK_FALSE(strong.weakly_typed());
  CHECK_THROWS_AS(convert_to_dtype(strong, DType::kFloat, "my_op"), TypeError);
  CHECK_THROWS_WITH(
      convert_to_dtype(strong, DType::kFloat, "my_op"),
      Catch::Contains("my_op") && Catch::Contains("float32") && Catch::Contains("int64"));
}

namespace {

// A device that says it is a GPU but keeps its memory on the host: lets a
// CPU test see what the library does with a tensor that is not on the CPU.
class HostBackedGpu final : public Device {
 public:
  HostBackedGpu() : Device(DeviceType::kGPU, 5) {}
  std::string model() const override { return "host-backed test GPU"; }
  size_t total_memory() const override { return size_t{1} << 30; }
  void* allocate(size_t bytes) override { return bytes == 0 ? nullptr : std::malloc(bytes); }
  void deallocate(void* ptr) noexcept override { std::free(ptr); }
  void synchronize() override {}
  std::shared_ptr<Event> record_event() override { return nullptr; }
  void wait_event(const Event&) override {}
  void memset(void* ptr, int value, size_t bytes) override { std::memset(ptr, value, bytes); }
  void copy_from_host_async(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host_async(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
};

}  // namespace

TEST_CASE("data<T>() is a host pointer: CPU tensors only", "[tensor]") {
  Tensor host = Tensor::from_vector<float>({1.f, 2.f, 3.f});
  host.data<float>()[1] = 7.f;
  CHECK(host.to_vector<float>() == std::vector<float>{1.f, 7.f, 3.f});
  CHECK(host.data<float>() == host.raw_data());
  CHECK_THROWS_AS(host.data<int32_t>(), TypeError);
  CHECK(Tensor(DType::kFloat, TensorShape{0}).data<float>() == nullptr);

  HostBackedGpu gpu;
  Tensor off_cpu(DType::kFloat, TensorShape{3}, gpu);
  CHECK(off_cpu.raw_data() != nullptr);
  CHECK_THROWS_AS(off_cpu.data<float>(), FailedPreconditionError);
  CHECK_THROWS_WITH(off_cpu.data<float>(), Catch::Contains("Tensor::data") &&
                                               Catch::Contains("/device:GPU:5") &&
                                               Catch::Contains("raw_data()"));
  // The dtype is checked first, as before.
  CHECK_THROWS_AS(off_cpu.data<double>(), TypeError);
  // Zero elements off the CPU: still not a host pointer to hand out.
  CHECK_THROWS_AS(Tensor(DType::kFloat, TensorShape{0}, gpu).data<float>(),
                  FailedPreconditionError);
}

// Run by CTest on CPU:0 and on GPU:0 (test_runtime_on_gpu).
TEST_CASE("data<T>() on the test device's tensors", "[tensor]") {
  Tensor t = Tensor::zeros(DType::kInt32, {4}, testing::test_device());
  if (t.on_cpu()) {
    CHECK(t.data<int32_t>()[3] == 0);
  } else {
    CHECK_THROWS_AS(t.data<int32_t>(), FailedPreconditionError);
    CHECK(t.to_host().data<int32_t>()[3] == 0);
  }
}
