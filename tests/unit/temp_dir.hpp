#pragma once
// Shared by the unit tests that touch files or start the fixture programs: a
// private temp directory, and the path of a fixture program.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace air::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/air-unit-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& content) const {
    const std::string p = file(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

private:
  std::string path_;
};

/// The path of a fixture program (tests/fixtures, built into AIR_FIXTURE_DIR).
/// Appended rather than `+`: g++ 12 at -O2 warns (-Warray-bounds, falsely) on
/// `std::string(...) + "/" + name` once inlined from a header.
inline std::string fixture(const std::string& name) {
  std::string path = AIR_FIXTURE_DIR;
  path += '/';
  path += name;
  return path;
}

} // namespace air::test
