// varstate error hierarchy.
//
// Every public varstate function reports failure by throwing one of the
// classes below. They mirror TensorFlow's canonical error codes (the ones its
// documentation says an op "raises") plus ValueError/TypeError where the
// Python API raises those. Messages name the variable, file, index or device
// involved and give the expected and the actual value, e.g.
//   Assign to "dense/w:0": shape mismatch: expected [784,256], got [784,128]
//
// A function that throws has modified nothing (validate, then mutate).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace varstate {

// TensorFlow's canonical codes (tensorflow/core/protobuf/error_codes.proto)
// plus two codes for the Python-level errors.
enum class ErrorCode : int {
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kValue = 100,  // Python ValueError
  kType = 101,   // Python TypeError
};

std::string_view error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

#define VARSTATE_DECLARE_ERROR(Name, Code)                              \
  class Name : public Error {                                           \
   public:                                                              \
    explicit Name(const std::string& message) : Error(Code, message) {} \
  };

VARSTATE_DECLARE_ERROR(CancelledError, ErrorCode::kCancelled)
VARSTATE_DECLARE_ERROR(UnknownError, ErrorCode::kUnknown)
VARSTATE_DECLARE_ERROR(InvalidArgumentError, ErrorCode::kInvalidArgument)
VARSTATE_DECLARE_ERROR(DeadlineExceededError, ErrorCode::kDeadlineExceeded)
VARSTATE_DECLARE_ERROR(NotFoundError, ErrorCode::kNotFound)
VARSTATE_DECLARE_ERROR(AlreadyExistsError, ErrorCode::kAlreadyExists)
VARSTATE_DECLARE_ERROR(PermissionDeniedError, ErrorCode::kPermissionDenied)
VARSTATE_DECLARE_ERROR(ResourceExhaustedError, ErrorCode::kResourceExhausted)
VARSTATE_DECLARE_ERROR(FailedPreconditionError, ErrorCode::kFailedPrecondition)
VARSTATE_DECLARE_ERROR(AbortedError, ErrorCode::kAborted)
VARSTATE_DECLARE_ERROR(OutOfRangeError, ErrorCode::kOutOfRange)
VARSTATE_DECLARE_ERROR(UnimplementedError, ErrorCode::kUnimplemented)
VARSTATE_DECLARE_ERROR(InternalError, ErrorCode::kInternal)
VARSTATE_DECLARE_ERROR(UnavailableError, ErrorCode::kUnavailable)
VARSTATE_DECLARE_ERROR(DataLossError, ErrorCode::kDataLoss)
VARSTATE_DECLARE_ERROR(ValueError, ErrorCode::kValue)
VARSTATE_DECLARE_ERROR(TypeError, ErrorCode::kType)

#undef VARSTATE_DECLARE_ERROR

// `s` in double quotes, as error messages name files, tensors and variables.
inline std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Throws the class of `code` (InvalidArgumentError for kInvalidArgument,
// ...) with `message`: an error carried as data (from another process)
// raised again as the error it was.
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);

// Rethrows the exception currently being handled with `context` prepended to
// its message ("context: original message"), keeping its class. Lets each
// layer add what it knows as an error travels up. Call only inside a catch.
[[noreturn]] void rethrow_with_context(const std::string& context);

}  // namespace varstate
