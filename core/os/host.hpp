#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"

#include <cstdint>
#include <string>

namespace air {

/// Asks the kernel for a free TCP port on `addr` (bind to port 0). Like
/// torchrun, the port is free now and could be taken before rank 0 binds it.
Expected<int> choose_free_port(const std::string& addr);

/// Whether `host` (a name or an IPv4 address) is one of this machine's own
/// addresses: binding a socket to it succeeds. false when it does not resolve.
bool is_local_address(const std::string& host);

/// Checks that a user-given master port is free, so a taken port is reported
/// as such before launch instead of as a crash of rank 0 (usage error, exit 2).
Status check_port_free(const std::string& addr, int port);

/// A fresh run id that sorts by start time: "20261201-025512-a1b2c3" (UTC
/// date and time, then 6 lowercase hex characters from /dev/urandom).
std::string make_run_id();

/// Creates `dir` and its parents (mode 0700 for the last component). Errors name the path.
Status make_directories(const std::string& dir);

/// Creates a private run directory under $TMPDIR (or /tmp): "air-run-<run_id>-XXXXXX".
Expected<std::string> make_private_run_dir(const Environment& env, const std::string& run_id);

/// Removes a directory tree air-run created (best effort, no symlink following).
void remove_tree(const std::string& dir);

/// Checks before launch that a program can be started: a bare name is looked
/// up along env's PATH (as the ranks will), a path must be an executable file.
/// Errors: not_found (exit 127) or not_executable (exit 126), naming the program;
/// a directory says so ("train: is a directory, not a program").
Expected<std::string> check_executable(const std::string& name, const Environment& env);

/// Checks that a script or file target exists and is readable (exit 127 when
/// missing, 126 when unreadable or a directory).
Status check_readable_file(const std::string& path, const std::string& what);

/// This host's name for reports.
std::string host_name();

/// This host's fully qualified name, found the way Python's socket.getfqdn()
/// finds it (which is what torchrun gives ranks as MASTER_ADDR under a c10d
/// rendezvous): the host name's first address looked up in reverse, then the
/// first of its canonical name and aliases that has a dot, else the canonical
/// name. The plain host name when a lookup fails.
std::string host_fqdn();

} // namespace air

namespace air {

/// The largest spec or requirements file air-run reads (a spec is a few hundred bytes).
inline constexpr std::uint64_t k_max_text_file_bytes = 4 * 1024 * 1024;

/// Reads a whole text file (the spec). Only a regular file of at most
/// `k_max_text_file_bytes` is read; a FIFO or device is refused without
/// blocking. Errors are usage errors naming the path.
Expected<std::string> read_text_file(const std::string& path, const std::string& what);

/// Reads standard input to its end (`-f -`), at most `k_max_text_file_bytes`.
/// Errors are usage errors naming `what` ("cannot read spec file <stdin>: ...").
Expected<std::string> read_standard_input(const std::string& what);

/// The directory holding air-run's own executable (from /proc/self/exe).
std::string self_exe_dir();

/// Finds the `air` Python package's parent directory: $AIR_PYTHON_PACKAGE_DIR,
/// the source tree air-run was built from, or <prefix>/share/air-run/python
/// next to an installed binary. "" when none exists.
std::string find_python_package_dir(const Environment& env);

} // namespace air
