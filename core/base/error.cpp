#include "core/base/error.hpp"

#include <cstring>

namespace air {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::usage:
    return "usage";
  case ErrorKind::hardware:
    return "hardware";
  case ErrorKind::system:
    return "system";
  case ErrorKind::not_found:
    return "not_found";
  case ErrorKind::not_executable:
    return "not_executable";
  }
  return "system";
}

Error sys_error(const std::string& call, int err) {
  return {ErrorKind::system, call + ": " + std::strerror(err)};
}

} // namespace air
