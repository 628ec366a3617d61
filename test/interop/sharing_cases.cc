#include "sharing_cases.h"

#include <cstdint>
#include <fstream>
#include <functional>
#include <utility>

#include "varstate/error.h"
#include "varstate/graph.h"
#include "varstate/partitioners.h"
#include "varstate/placement.h"
#include "varstate/variable_scope.h"

namespace varstate::interop {
namespace {

using Case = std::function<std::string()>;

std::string kind(const GetVariableResult& r) {
  return (r.is_partitioned() ? "partitioned " : "variable ") + r.name();
}

GetVariableResult make(std::string_view name, TensorShape shape) {
  return get_variable(name, {.shape = std::move(shape)});
}

std::string reuse_name(Reuse r) {
  if (r == AUTO_REUSE) return "auto";
  return r ? "True" : "False";
}

std::string reuse_false() {
  {
    auto a = variable_scope("a", {.reuse = false});
    make("v", {1});
  }
  auto a = variable_scope("a", {.reuse = true});
  auto b = variable_scope("b", {.reuse = false});
  auto again = variable_scope(a.scope(), {.reuse = false});
  return reuse_name(b->reuse()) + " " + get_variable("v").name();
}

std::string auto_reuse() {
  auto a = variable_scope("a", {.reuse = AUTO_REUSE});
  const bool same = Variable(make("v", {1})).same_as(make("v", {1}));
  auto b = variable_scope("b");
  const bool nested = Variable(make("x", {1})).same_as(make("x", {1}));
  std::string c_reuse;
  {
    auto c = variable_scope("c", {.reuse = true});
    c_reuse = reuse_name(c->reuse());
  }
  return std::to_string(same) + " " + std::to_string(nested) + " " + reuse_name(a->reuse()) + " " +
         reuse_name(b->reuse()) + " " + c_reuse;
}

std::string custom_getters() {
  std::string log;
  auto logger = [&log](std::string tag) -> CustomGetter {
    return [&log, tag](const Getter& getter, const std::string& name, const GetVariableOptions& o) {
      log += tag + ":" + name + ",";
      return getter(name, o);
    };
  };
  auto a = variable_scope("a", {.custom_getter = logger("outer")});
  auto b = variable_scope("b", {.custom_getter = logger("inner")});
  get_variable("v", {.shape = TensorShape{1}, .custom_getter = logger("call")});
  make("w", {1});
  return log;
}

std::string reuse_partitioned() {
  {
    auto a = variable_scope("a", {.partitioner = fixed_size_partitioner(2)});
    make("v", {4, 1});
  }
  auto a = variable_scope("a", {.reuse = true});
  return kind(get_variable("v"));
}

std::string unpartitioned_after_partitioned(Reuse reuse) {
  {
    auto a = variable_scope("a", {.partitioner = fixed_size_partitioner(2)});
    make("w", {4, 1});
  }
  auto a = variable_scope("a", {.reuse = reuse});
  return kind(make("w", {4, 1}));
}

std::string scalar_under_partitioner() {
  auto a = variable_scope("a", {.partitioner = fixed_size_partitioner(2)});
  return kind(make("s", TensorShape{}));
}

std::string string_default() {
  Variable v = get_variable("s", {.shape = TensorShape{2}, .dtype = DType::kString});
  std::string out;
  for (const std::string& s : v.initial_value().to_host().to_vector<std::string>()) {
    out += "[" + s + "]";
  }
  return out;
}

std::string caching_function() {
  std::string calls;
  DeviceFunction fn = [&calls](const PlacementRequest& r) {
    calls += r.name + " " + r.type + ",";
    return std::string("/cpu:0");
  };
  {
    auto a = variable_scope("a", {.caching_device = fn});
    make("v", {1});
  }
  get_variable("w", {.shape = TensorShape{1}, .caching_device = fn});
  return calls;
}

std::string partition_counts(std::vector<int64_t> counts) {
  Partitioner p = [counts](const TensorShape&, DType) { return counts; };
  return kind(get_variable("p", {.shape = TensorShape{10, 1}, .partitioner = p}));
}

std::vector<std::pair<std::string, Case>> cases() {
  std::vector<std::pair<std::string, Case>> out = {
      {"reuse_false", reuse_false},
      {"auto_reuse", auto_reuse},
      {"custom_getters", custom_getters},
      {"reuse_partitioned", reuse_partitioned},
      {"unpartitioned_after_partitioned", [] { return unpartitioned_after_partitioned(false); }},
      {"unpartitioned_after_partitioned_auto",
       [] { return unpartitioned_after_partitioned(AUTO_REUSE); }},
      {"scalar_under_partitioner", scalar_under_partitioner},
      {"string_default", string_default},
      {"caching_function", caching_function},
      {"partition_11",
       [] {
         return partition_counts({11, 1});
       }},
      {"partition_int64_max",
       [] {
         return partition_counts({INT64_MAX, 1});
       }},
      {"partition_0",
       [] {
         return partition_counts({0, 1});
       }},
      {"partition_rank", [] { return partition_counts({2}); }},
      {"partition_10",
       [] {
         return partition_counts({10, 1});
       }},
  };
  const char* names[] = {"a b", "a:0", "/abs", "-a", "_a", ".a", "a>b"};
  for (const char* name : names) {
    out.emplace_back(std::string("get_variable ") + name, [name] { return kind(make(name, {1})); });
    out.emplace_back(std::string("variable_scope ") + name, [name] {
      auto s = variable_scope(name);
      return s->name();
    });
    out.emplace_back(std::string("nested ") + name, [name] {
      auto outer = variable_scope("s");
      auto s = variable_scope(name);
      return s->name() + " " + kind(make(name, {1}));
    });
  }
  return out;
}

}  // namespace

int cmd_sharing(const std::vector<std::string>& args) {
  std::ofstream out(args.at(0));
  if (!out) throw NotFoundError("interop_tool: cannot write " + quoted(args.at(0)));
  for (const auto& [name, fn] : cases()) {
    std::string outcome;
    reset_default_graph();
    try {
      outcome = "ok " + fn();
    } catch (const Error& e) {
      outcome = std::string(error_code_name(e.code())) + " " + e.what();
    }
    out << name << "\t" << outcome << "\n";
  }
  return 0;
}

}  // namespace varstate::interop
