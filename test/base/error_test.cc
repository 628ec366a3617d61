#include <catch2/catch.hpp>

#include "varstate/error.h"

using namespace varstate;

TEST_CASE("errors carry their canonical code", "[error]") {
  CHECK(NotFoundError("x").code() == ErrorCode::kNotFound);
  CHECK(DataLossError("x").code() == ErrorCode::kDataLoss);
  CHECK(error_code_name(ErrorCode::kFailedPrecondition) == "FailedPreconditionError");
}

TEST_CASE("rethrow_with_context keeps the class and prepends context", "[error]") {
  auto inner = [] { throw OutOfRangeError("index 7 is not in [0, 5)"); };
  try {
    try {
      inner();
    } catch (...) {
      rethrow_with_context("gathering from \"emb\"");
    }
    FAIL("nothing thrown");
  } catch (const OutOfRangeError& e) {
    CHECK(std::string(e.what()) == "gathering from \"emb\": index 7 is not in [0, 5)");
  }
}
