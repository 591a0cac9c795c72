#pragma once

#include "core/base/environment.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace air {

/// One rank's complete environment, kept as two parts: the variables every
/// rank of the node starts with (one map, shared by all of them and never
/// copied) and the rank's own on top (RANK, LOCAL_RANK, its files: a
/// handful). Reads see the two merged, the rank's own first; writes change
/// this rank only. A plan of 128 ranks so holds one copy of the parent's
/// environment, not 128: copying, laying out and freeing every rank's whole
/// map was most of the plan's and the cleanup's time (on a 16-CPU host, 128
/// ranks: 2.71 and 1.69 ms before, 0.38 and 0.48 ms after).
class RankEnvironment {
public:
  RankEnvironment() = default;
  /// `shared` as this rank's variables, shared with every copy made from it.
  explicit RankEnvironment(std::shared_ptr<const Environment> shared) : shared_(std::move(shared)) {}
  /// A private copy of `env` (a caller with one rank, the tests); implicit,
  /// so that a plain map can be given where a rank's environment is wanted.
  RankEnvironment(const Environment& env) : shared_(std::make_shared<const Environment>(env)) {}

  /// The value of `name`, or nullptr when this rank does not have it.
  const std::string* get(const std::string& name) const;
  std::size_t count(const std::string& name) const { return get(name) != nullptr ? 1 : 0; }
  /// The value of `name`; throws std::out_of_range when unset, as std::map::at does.
  const std::string& at(const std::string& name) const;
  /// The variables this rank has.
  std::size_t size() const;
  bool empty() const { return size() == 0; }

  /// This rank's `name`, created empty when unset, as std::map's operator[]:
  /// a write goes to this rank only.
  std::string& operator[](const std::string& name);
  /// Unsets `name` for this rank only.
  void erase(const std::string& name);

  /// Calls f(name, value) for every variable, in name order.
  template <class F> void for_each(F&& f) const;
  /// The whole environment as one map (a copy).
  Environment flat() const;

  /// The two parts, for a reader that works on them without merging (the
  /// warm start sends a rank only what differs from what it shares): the
  /// shared map (null when there is none) and this rank's own variables, a
  /// value each or nullopt where the rank unset a shared one.
  using Own = std::map<std::string, std::optional<std::string>>;
  const std::shared_ptr<const Environment>& shared() const { return shared_; }
  const Own& own() const { return own_; }

private:
  const std::string* shared_value(const std::string& name) const;

  std::shared_ptr<const Environment> shared_;
  /// This rank's own: a value, or nullopt where it unset a shared variable.
  Own own_;
};

template <class F> void RankEnvironment::for_each(F&& f) const {
  static const Environment none;
  const Environment& shared = shared_ ? *shared_ : none;
  auto s = shared.begin();
  auto o = own_.begin();
  while (s != shared.end() || o != own_.end()) {
    if (o == own_.end() || (s != shared.end() && s->first < o->first)) {
      f(s->first, s->second);
      ++s;
      continue;
    }
    if (s != shared.end() && s->first == o->first) ++s; // the rank's own wins
    if (o->second) f(o->first, *o->second);
    ++o;
  }
}

} // namespace air
