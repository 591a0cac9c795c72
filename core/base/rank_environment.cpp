#include "core/base/rank_environment.hpp"

#include <stdexcept>

namespace air {

const std::string* RankEnvironment::shared_value(const std::string& name) const {
  if (!shared_) return nullptr;
  const auto it = shared_->find(name);
  return it != shared_->end() ? &it->second : nullptr;
}

const std::string* RankEnvironment::get(const std::string& name) const {
  const auto own = own_.find(name);
  if (own != own_.end()) return own->second ? &*own->second : nullptr;
  return shared_value(name);
}

const std::string& RankEnvironment::at(const std::string& name) const {
  const std::string* value = get(name);
  if (value == nullptr) throw std::out_of_range("environment variable " + name + " is not set");
  return *value;
}

std::size_t RankEnvironment::size() const {
  std::size_t n = 0;
  for_each([&n](const std::string&, const std::string&) { ++n; });
  return n;
}

std::string& RankEnvironment::operator[](const std::string& name) {
  auto [it, inserted] = own_.try_emplace(name);
  if (inserted) {
    // First write of this rank: it starts from the shared value, if any.
    const std::string* shared = shared_value(name);
    it->second = shared != nullptr ? *shared : std::string();
  } else if (!it->second) {
    it->second = std::string(); // unset before: back, empty
  }
  return *it->second;
}

void RankEnvironment::erase(const std::string& name) {
  if (shared_value(name) != nullptr)
    own_[name] = std::nullopt; // hides the shared one for this rank
  else
    own_.erase(name);
}

Environment RankEnvironment::flat() const {
  Environment out;
  for_each([&out](const std::string& name, const std::string& value) {
    out.emplace_hint(out.end(), name, value);
  });
  return out;
}

} // namespace air
