#include "core/base/error.hpp"

#include <cstring>

namespace air {

Error sys_error(const std::string& call, int err) {
  return {ErrorKind::system, call + ": " + std::strerror(err)};
}

} // namespace air
