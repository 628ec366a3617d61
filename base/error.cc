#include "varstate/error.h"

#include <exception>

namespace varstate {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancelled:
      return "CancelledError";
    case ErrorCode::kUnknown:
      return "UnknownError";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorCode::kDeadlineExceeded:
      return "DeadlineExceededError";
    case ErrorCode::kNotFound:
      return "NotFoundError";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExistsError";
    case ErrorCode::kPermissionDenied:
      return "PermissionDeniedError";
    case ErrorCode::kResourceExhausted:
      return "ResourceExhaustedError";
    case ErrorCode::kFailedPrecondition:
      return "FailedPreconditionError";
    case ErrorCode::kAborted:
      return "AbortedError";
    case ErrorCode::kOutOfRange:
      return "OutOfRangeError";
    case ErrorCode::kUnimplemented:
      return "UnimplementedError";
    case ErrorCode::kInternal:
      return "InternalError";
    case ErrorCode::kUnavailable:
      return "UnavailableError";
    case ErrorCode::kDataLoss:
      return "DataLossError";
    case ErrorCode::kValue:
      return "ValueError";
    case ErrorCode::kType:
      return "TypeError";
  }
  return "Error";
}

void throw_error(ErrorCode code, const std::string& msg) {
  switch (code) {
    case ErrorCode::kCancelled:
      throw CancelledError(msg);
    case ErrorCode::kUnknown:
      throw UnknownError(msg);
    case ErrorCode::kInvalidArgument:
      throw InvalidArgumentError(msg);
    case ErrorCode::kDeadlineExceeded:
      throw DeadlineExceededError(msg);
    case ErrorCode::kNotFound:
      throw NotFoundError(msg);
    case ErrorCode::kAlreadyExists:
      throw AlreadyExistsError(msg);
    case ErrorCode::kPermissionDenied:
      throw PermissionDeniedError(msg);
    case ErrorCode::kResourceExhausted:
      throw ResourceExhaustedError(msg);
    case ErrorCode::kFailedPrecondition:
      throw FailedPreconditionError(msg);
    case ErrorCode::kAborted:
      throw AbortedError(msg);
    case ErrorCode::kOutOfRange:
      throw OutOfRangeError(msg);
    case ErrorCode::kUnimplemented:
      throw UnimplementedError(msg);
    case ErrorCode::kInternal:
      throw InternalError(msg);
    case ErrorCode::kUnavailable:
      throw UnavailableError(msg);
    case ErrorCode::kDataLoss:
      throw DataLossError(msg);
    case ErrorCode::kValue:
      throw ValueError(msg);
    case ErrorCode::kType:
      throw TypeError(msg);
  }
  throw Error(code, msg);
}

void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const Error& e) {
    throw_error(e.code(), context + ": " + e.what());
  } catch (const std::exception& e) {
    throw InternalError(context + ": " + e.what());
  }
}

}  // namespace varstate
