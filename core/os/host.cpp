#include "core/os/host.hpp"

#include "core/os/file_read.hpp"
#include "core/os/process.hpp"
#include "core/os/signals.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace air {

namespace {

/// Resolves `addr` to an IPv4 socket address; "" or "localhost" give loopback.
bool to_sockaddr(const std::string& addr, int port, sockaddr_in* out) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &out->sin_addr) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr; // NOLINT
  freeaddrinfo(res);
  return true;
}

/// Binds a throwaway socket. Returns the bound port or -errno.
int try_bind(const std::string& addr, int port) {
  sockaddr_in sa{};
  if (!to_sockaddr(addr, port, &sa)) {
    // An address this host cannot resolve (another node's name): bind on all interfaces.
    to_sockaddr("0.0.0.0", port, &sa);
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  // As rank 0's TCPStore binds (SO_REUSEADDR): a port whose last connections
  // linger in TIME_WAIT (the previous srun step of the same job) is free to it.
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int result = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) { // NOLINT
    result = -errno;
    if (result == -EADDRNOTAVAIL) { // not a local address: the port is for another host
      result = port;
    }
  } else {
    socklen_t len = sizeof(sa);
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len); // NOLINT
    result = ntohs(sa.sin_port);
  }
  close(fd);
  return result;
}

} // namespace

Expected<int> choose_free_port(const std::string& addr) {
  const int port = try_bind(addr, 0);
  if (port <= 0) return sys_error("bind (choosing a free master port)", -port);
  return port;
}

bool is_local_address(const std::string& host) {
  sockaddr_in sa{};
  if (!to_sockaddr(host, 0, &sa)) return false;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool local = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0; // NOLINT
  close(fd);
  return local;
}

Status check_port_free(const std::string& addr, int port) {
  const int r = try_bind(addr, port);
  if (r == -EADDRINUSE) {
    return usage_error(fmt::format("master port {} on {} is already in use; choose another with "
                                   "--master-port or leave it unset to let air-run pick a free one",
                                   port, addr));
  }
  if (r < 0) return sys_error(fmt::format("bind {}:{}", addr, port), -r);
  return ok_status();
}

std::string make_run_id() {
  unsigned char bytes[6] = {};
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool filled = false;
  if (fd >= 0) {
    filled = read(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes));
    close(fd);
  }
  if (!filled) { // no /dev/urandom (odd chroots): pid and clock still differ between runs
    const auto mix =
        static_cast<unsigned long>(getpid()) * 2654435761UL ^ static_cast<unsigned long>(time(nullptr));
    for (size_t i = 0; i < sizeof(bytes); ++i) bytes[i] = static_cast<unsigned char>(mix >> (8 * i));
  }
  // UTC time first, so that run ids (and the folders named after them) sort
  // by when the run started; the random part keeps same-second runs apart.
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S-", &utc);
  std::string id = stamp;
  for (std::size_t i = 0; i < 3; ++i) id += fmt::format("{:02x}", bytes[i]);
  return id;
}

Status make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return usage_error(fmt::format("cannot create directory {}: {}", dir, ec.message()));
  return ok_status();
}

Expected<std::string> make_private_run_dir(const Environment& env, const std::string& run_id) {
  std::string base = env_or(env, "TMPDIR", "/tmp");
  if (base.empty()) base = "/tmp";
  std::string templ = fmt::format("{}/air-run-{}-XXXXXX", base, run_id);
  if (mkdtemp(templ.data()) == nullptr) return sys_error("mkdtemp " + templ, errno);
  return templ;
}

void remove_tree(const std::string& dir) {
  // A run that left its folder empty (the common case) needs one call, not
  // remove_all's nine (open, read, close, unlink, then rmdir).
  if (::rmdir(dir.c_str()) == 0) return;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec); // remove_all does not follow symlinks
}

Expected<std::string> check_executable(const std::string& name, const Environment& env) {
  struct stat st {};
  if (name.find('/') == std::string::npos) {
    auto found = resolve_executable(name, env_or(env, "PATH", k_default_path));
    // A folder of that name here is what the user most likely meant.
    if (!found && stat(name.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return Error{found.error().kind, found.error().message + " (" + name + " here is a directory)"};
    return found;
  }
  if (stat(name.c_str(), &st) != 0) return Error{ErrorKind::not_found, name + ": no such file"};
  if (S_ISDIR(st.st_mode)) return Error{ErrorKind::not_executable, name + ": is a directory, not a program"};
  if (access(name.c_str(), X_OK) != 0) {
    return Error{ErrorKind::not_executable, name + ": permission denied (not an executable file)"};
  }
  return name;
}

Status check_readable_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return Error{ErrorKind::not_found, fmt::format("{} {}: no such file", what, path)};
  if (S_ISDIR(st.st_mode)) {
    return Error{ErrorKind::not_executable, fmt::format("{} {}: is a directory, not a file", what, path)};
  }
  if (access(path.c_str(), R_OK) != 0) {
    return Error{ErrorKind::not_executable, fmt::format("{} {}: permission denied", what, path)};
  }
  return ok_status();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string host_fqdn() {
  const std::string name = host_name();
  // The host name's first address, as Python's gethostbyaddr(name) takes it.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return name;
  const void* address = nullptr;
  socklen_t length = 0;
  if (found->ai_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr); // NOLINT
    address = &in->sin_addr;
    length = sizeof(in->sin_addr);
  } else if (found->ai_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(found->ai_addr); // NOLINT
    address = &in6->sin6_addr;
    length = sizeof(in6->sin6_addr);
  }
  hostent entry{};
  hostent* result = nullptr;
  char buf[8192];
  int h_errno_value = 0;
  const int rc = address == nullptr ? -1
                                    : gethostbyaddr_r(address, length, found->ai_family, &entry, buf,
                                                      sizeof(buf), &result, &h_errno_value);
  freeaddrinfo(found);
  if (rc != 0 || result == nullptr || result->h_name == nullptr) return name;
  // The canonical name, then the aliases: the first with a dot wins.
  if (std::strchr(result->h_name, '.') != nullptr) return result->h_name;
  for (char** alias = result->h_aliases; alias != nullptr && *alias != nullptr; ++alias) {
    if (std::strchr(*alias, '.') != nullptr) return *alias;
  }
  return result->h_name;
}

} // namespace air

namespace air {

Expected<std::string> read_text_file(const std::string& path, const std::string& what) {
  // Regular files only, opened without blocking and read with a bound: "-f
  // /dev/zero" would read until memory runs out and "-f FIFO" would block
  // beyond any signal.
  FileRead file = read_small_file(path, k_max_text_file_bytes);
  switch (file.state) {
  case FileRead::State::ok:
    return std::move(file.text);
  case FileRead::State::missing:
    return usage_error(fmt::format("cannot read {} {}: {}", what, path, std::strerror(ENOENT)));
  case FileRead::State::too_large:
    return usage_error(
        fmt::format("cannot read {} {}: larger than {} bytes", what, path, k_max_text_file_bytes));
  case FileRead::State::unreadable:
    break;
  }
  // file.error reads "cannot read PATH: WHY"; say which file it was.
  const std::string prefix = "cannot read " + path + ": ";
  const std::string why = file.error.rfind(prefix, 0) == 0 ? file.error.substr(prefix.size()) : file.error;
  return usage_error(fmt::format("cannot read {} {}: {}", what, path, why));
}

Expected<std::string> read_standard_input(const std::string& what) {
  std::string text;
  char buffer[65536];
  for (;;) {
    // `-f -` from a writer that keeps the pipe open: Ctrl-C or SIGTERM must
    // still end air-run, whose signals are blocked for the signalfd.
    if (auto waited = wait_readable_or_die(STDIN_FILENO); !waited) return waited.error();
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      return usage_error(fmt::format("cannot read {} <stdin>: {}", what, std::strerror(errno)));
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > k_max_text_file_bytes) {
      return usage_error(
          fmt::format("cannot read {} <stdin>: larger than {} bytes", what, k_max_text_file_bytes));
    }
  }
}

std::string self_exe_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string find_python_package_dir(const Environment& env) {
  auto has_package = [](const std::filesystem::path& dir) {
    std::error_code ec;
    return !dir.empty() && std::filesystem::exists(dir / "air" / "__init__.py", ec);
  };
  if (const auto from_env = env_or(env, "AIR_PYTHON_PACKAGE_DIR"); has_package(from_env)) return from_env;
  const std::filesystem::path exe_dir = self_exe_dir();
  for (const auto& candidate :
       {exe_dir / ".." / "share" / "air-run" / "python", std::filesystem::path(AIR_SOURCE_DIR) / "python"}) {
    if (has_package(candidate)) return std::filesystem::weakly_canonical(candidate).string();
  }
  return {};
}

} // namespace air
