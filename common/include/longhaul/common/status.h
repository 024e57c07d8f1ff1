// Status and Result<T>: the error values that cross component boundaries.
//
// A Status is a code plus a human-readable message that names the problem
// ("job spec line 7: field 'rounds' must be > 0, got -3"). Exceptions stay inside
// a component; anything returned across one is a Status or a Result<T>.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace longhaul {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input: config, CLI argument, message field
  kNotFound,           // unknown job, region, key, file
  kAlreadyExists,
  kFailedPrecondition, // valid request in the wrong state (cancel a finished job)
  kDeadlineExceeded,   // a deadline from timeouts.h passed
  kUnavailable,        // peer unreachable or gone; retrying may help
  kDataLoss,           // checksum mismatch, truncated frame, corrupt file
  kPermissionDenied,   // key not on the allowlist
  kAborted,            // round aborted, collective aborted by a peer
  kCancelled,
  kResourceExhausted,  // oversized message, too many workers for the region
  kVersionMismatch,    // wire protocol version differs
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "DEADLINE_EXCEEDED: waiting for chunk 3 from eu-west".
  std::string ToString() const;
  // Prefixes context to the message: Status.WithContext("loading job.yaml").
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status VersionMismatch(std::string m) { return {StatusCode::kVersionMismatch, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T>: a value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace longhaul

// Returns early with the Status if it is not ok.
#define LONGHAUL_RETURN_IF_ERROR(expr)            \
  do {                                            \
    ::longhaul::Status _lh_status = (expr);       \
    if (!_lh_status.ok()) return _lh_status;      \
  } while (0)

#define LONGHAUL_CONCAT_INNER(a, b) a##b
#define LONGHAUL_CONCAT(a, b) LONGHAUL_CONCAT_INNER(a, b)
// LONGHAUL_ASSIGN_OR_RETURN(auto x, MakeX()); returns the Status on error.
#define LONGHAUL_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto LONGHAUL_CONCAT(_lh_result_, __LINE__) = (expr);                       \
  if (!LONGHAUL_CONCAT(_lh_result_, __LINE__).ok())                           \
    return LONGHAUL_CONCAT(_lh_result_, __LINE__).status();                   \
  lhs = std::move(LONGHAUL_CONCAT(_lh_result_, __LINE__)).value()
