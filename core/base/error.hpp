#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace air {

/// What kind of failure an `Error` reports. The CLI maps each kind to an exit
/// code in one place (cli/app.cpp); core code never calls exit().
enum class ErrorKind {
  usage,          ///< bad flag, bad spec value, unknown key: exit 2, nothing launched
  hardware,       ///< the spec does not match the detected accelerators: exit 2
  system,         ///< a system call failed (message names the call): exit 125
  not_found,      ///< the target program does not exist: exit 127
  not_executable, ///< the target exists but cannot be executed: exit 126
};

/// A failure as a value: its kind plus a message that already names the
/// file, line, key or system call involved. Printed as `air-run: error: <message>`.
struct Error {
  ErrorKind kind = ErrorKind::usage;
  std::string message;
};

/// The kind's name as reports spell it: "usage", "hardware", "system",
/// "not_found", "not_executable".
std::string_view to_string(ErrorKind kind);

/// Builds a usage error (exit code 2).
inline Error usage_error(std::string message) { return {ErrorKind::usage, std::move(message)}; }

/// Builds a system error from a call name and an errno value, e.g. `pipe2: Too many open files`.
Error sys_error(const std::string& call, int err);

/// A value or an `Error`. Every fallible function in core returns one, so the
/// error channel is visible in the signature (ccache's style, without exceptions).
template <typename T> class Expected {
public:
  Expected(T value) : v_(std::move(value)) {}     // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {} // NOLINT(google-explicit-constructor)
  /// The value made in place from `args`, with no temporary `T` moved in: for
  /// a `T` that is itself a variant, that move trips g++ 14's flow analysis
  /// (-Wmaybe-uninitialized on the variant's members).
  template <typename... Args>
  explicit Expected(std::in_place_t, Args&&... args)
      : v_(std::in_place_index<0>, std::forward<Args>(args)...) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

private:
  std::variant<T, Error> v_;
};

/// Success or an `Error`, for functions with nothing to return.
struct Unit {};
using Status = Expected<Unit>;
inline Status ok_status() { return Unit{}; }

} // namespace air

/// Propagates an error from an `Expected`-returning expression.
#define AIR_TRY(expr)                                                                                        \
  do {                                                                                                       \
    auto air_try_result_ = (expr);                                                                           \
    if (!air_try_result_) return air_try_result_.error();                                                    \
  } while (false)
