// Slurm's environment, host lists and scontrol output, parsed without the OS.
#include "core/cluster/slurm.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace air {

namespace {

/// Parses a small non-negative decimal; nullopt when not one.
std::optional<long long> to_number(std::string_view s) {
  if (!all_digits(s) || s.size() > 12) return std::nullopt;
  long long n = 0;
  for (char c : s) n = n * 10 + (c - '0');
  return n;
}

/// Splits on commas that are not inside brackets.
std::vector<std::string_view> split_top_level(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') ++depth;
    if (text[i] == ']') --depth;
    if (text[i] == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

/// "01-03" -> {"01","02","03"}; "5" -> {"5"}.
Expected<std::vector<std::string>> expand_range(std::string_view range, const std::string& what,
                                                HostlistBounds bounds) {
  const std::size_t dash = range.find('-');
  const std::string_view first = range.substr(0, dash);
  const std::string_view last = dash == std::string_view::npos ? first : range.substr(dash + 1);
  const auto lo = to_number(first);
  const auto hi = to_number(last);
  if (!lo || !hi) return usage_error(fmt::format("{}: bad range '{}'", what, range));
  if (*hi < *lo) return usage_error(fmt::format("{}: range '{}' runs backwards", what, range));
  if (static_cast<std::size_t>(*hi - *lo) >= bounds.max_hosts)
    return usage_error(fmt::format("{}: range '{}' is too large", what, range));
  std::vector<std::string> out;
  for (long long n = *lo; n <= *hi; ++n) {
    std::string digits = std::to_string(n);
    if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
    out.push_back(std::move(digits));
  }
  return out;
}

/// One name with any number of bracket groups: "r[1-2]n[01-02]".
Expected<std::vector<std::string>> expand_name(std::string_view name, const std::string& what,
                                               HostlistBounds bounds) {
  const std::size_t open = name.find('[');
  if (open == std::string_view::npos) {
    if (name.find(']') != std::string_view::npos) return usage_error(what + ": unmatched ']'");
    return std::vector<std::string>{std::string(name)};
  }
  const std::size_t close = name.find(']', open);
  if (close == std::string_view::npos) return usage_error(what + ": unclosed '['");
  const std::string_view prefix = name.substr(0, open);
  const std::string_view inner = name.substr(open + 1, close - open - 1);
  if (inner.empty()) return usage_error(what + ": empty '[]'");
  auto rest = expand_name(name.substr(close + 1), what, bounds);
  if (!rest) return rest.error();
  std::vector<std::string> out;
  std::size_t bytes = 0;
  for (std::string_view range : split_top_level(inner)) {
    auto numbers = expand_range(range, what, bounds);
    if (!numbers) return numbers.error();
    for (const auto& n : *numbers) {
      for (const auto& tail : *rest) {
        bytes += prefix.size() + n.size() + tail.size();
        if (out.size() >= bounds.max_hosts || bytes > bounds.max_bytes)
          return usage_error(what + ": too many hosts");
        std::string host(prefix);
        host += n;
        host += tail;
        out.push_back(std::move(host));
      }
    }
  }
  return out;
}

const std::string* find(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

/// The first of `names` that is set, with its name.
std::pair<const char*, const std::string*> first_of(const Environment& env,
                                                    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const std::string* value = find(env, name)) return {name, value};
  }
  return {nullptr, nullptr};
}

Expected<int> read_int(const char* name, const std::string& text) {
  const auto n = to_number(text);
  if (!n || *n > 1'000'000'000) {
    return usage_error(fmt::format("{}: expected a whole number, got '{}'", name, text));
  }
  return static_cast<int>(*n);
}

/// The value of `key` in "Key=Value Key2=Value2" or "Key = Value" text.
std::optional<std::string> value_after(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while ((pos = text.find(key, pos)) != std::string_view::npos) {
    const bool at_word_start =
        pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '\n' || text[pos - 1] == '\t';
    std::size_t i = pos + key.size();
    pos = i;
    if (!at_word_start) continue;
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size() || text[i] != '=') continue;
    ++i;
    while (i < text.size() && text[i] == ' ') ++i;
    std::size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != '\n' && text[end] != '\t') ++end;
    return std::string(text.substr(i, end - i));
  }
  return std::nullopt;
}

} // namespace

Expected<std::vector<std::string>> expand_hostlist(std::string_view text, HostlistBounds bounds) {
  const std::string what = fmt::format("host list '{}'", text);
  const std::string trimmed(trim(text));
  if (trimmed.empty()) return usage_error(what + ": empty");
  std::vector<std::string> hosts;
  for (std::string_view part : split_top_level(trimmed)) {
    if (part.empty()) return usage_error(what + ": empty host name");
    auto names = expand_name(part, what, bounds);
    if (!names) return names.error();
    if (hosts.size() + names->size() > bounds.max_hosts) return usage_error(what + ": too many hosts");
    hosts.insert(hosts.end(), names->begin(), names->end());
  }
  return hosts;
}

Expected<std::vector<int>> expand_tasks_per_node(std::string_view text, HostlistBounds bounds) {
  const std::string what = fmt::format("tasks per node '{}'", text);
  std::vector<int> counts;
  const std::string trimmed(trim(text));
  for (std::string_view part : split_top_level(trimmed)) {
    std::string_view count = part;
    long long repeat = 1;
    if (const std::size_t paren = part.find("(x"); paren != std::string_view::npos) {
      if (part.back() != ')') return usage_error(what + ": expected N(xM)");
      const auto r = to_number(part.substr(paren + 2, part.size() - paren - 3));
      if (!r || *r < 1 || static_cast<std::size_t>(*r) > bounds.max_hosts)
        return usage_error(what + ": bad repeat count");
      repeat = *r;
      count = part.substr(0, paren);
    }
    const auto n = to_number(count);
    if (!n || *n > 1'000'000)
      return usage_error(what + ": expected a whole number, got '" + std::string(count) + "'");
    if (counts.size() + static_cast<std::size_t>(repeat) > bounds.max_hosts)
      return usage_error(what + ": too many nodes");
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), static_cast<int>(*n));
  }
  return counts;
}

Expected<std::optional<SlurmEnv>> read_slurm_env(const Environment& env) {
  const auto [job_var, job_id] = first_of(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (job_id == nullptr) return std::optional<SlurmEnv>();
  SlurmEnv s;
  s.job_id = *job_id;
  if (const auto [name, text] = first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"}); text != nullptr) {
    auto step = read_int(name, *text);
    if (!step) return step.error();
    s.step_id = *step;
  }
  const bool in_step = s.step_id.has_value();

  const auto [nodes_var, nodes_text] =
      in_step ? first_of(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"})
              : first_of(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"});
  if (nodes_text != nullptr) {
    auto n = read_int(nodes_var, *nodes_text);
    if (!n) return n.error();
    if (*n < 1) return usage_error(fmt::format("{}: expected at least 1 node, got {}", nodes_var, *n));
    s.num_nodes = *n;
  }
  if (const auto [name, text] = first_of(env, {"SLURM_NODEID"}); text != nullptr) {
    auto id = read_int(name, *text);
    if (!id) return id.error();
    s.node_id = *id;
  }
  if (s.node_id >= s.num_nodes) {
    return usage_error(
        fmt::format("SLURM_NODEID {} is outside 0..{} ({} nodes)", s.node_id, s.num_nodes - 1, s.num_nodes));
  }
  const auto [list_var, list_text] =
      in_step ? first_of(env, {"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"})
              : first_of(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (list_text != nullptr) {
    auto hosts = expand_hostlist(*list_text);
    if (!hosts) return Error{ErrorKind::usage, std::string(list_var) + ": " + hosts.error().message};
    s.nodes = std::move(*hosts);
    if (static_cast<int>(s.nodes.size()) != s.num_nodes) {
      return usage_error(fmt::format("{} names {} node(s) but {} says {}", list_var, s.nodes.size(),
                                     nodes_var ? nodes_var : "the node count", s.num_nodes));
    }
  }
  if (const std::string* name = find(env, "SLURMD_NODENAME")) {
    s.node_name = *name;
  } else if (!s.nodes.empty()) {
    s.node_name = s.nodes[static_cast<std::size_t>(s.node_id)];
  }
  if (const auto [name, text] = first_of(env, {"SLURM_LOCALID"}); text != nullptr) {
    auto id = read_int(name, *text);
    if (!id) return id.error();
    s.local_id = *id;
  }
  const auto [tasks_var, tasks_text] =
      in_step ? first_of(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
              : first_of(env, {"SLURM_TASKS_PER_NODE"});
  if (tasks_text != nullptr) {
    auto counts = expand_tasks_per_node(*tasks_text);
    if (!counts) return Error{ErrorKind::usage, std::string(tasks_var) + ": " + counts.error().message};
    s.tasks_per_node_text = std::string(tasks_var) + "=" + *tasks_text;
    if (static_cast<std::size_t>(s.node_id) < counts->size())
      s.tasks_on_this_node = (*counts)[static_cast<std::size_t>(s.node_id)];
  }
  if (const auto [name, text] = first_of(env, {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}); text != nullptr) {
    s.gpus = *text;
  }
  return std::optional<SlurmEnv>(std::move(s));
}

int slurm_master_port(std::string_view job_id) {
  std::size_t digits = 0;
  while (digits < job_id.size() && job_id[digits] >= '0' && job_id[digits] <= '9') ++digits;
  // Only the value mod 7500 matters: fold digit by digit, no overflow.
  long long mod = 0;
  for (std::size_t i = 0; i < digits; ++i) mod = (mod * 10 + (job_id[i] - '0')) % 7500;
  return 15000 + static_cast<int>(mod) * 2;
}

std::optional<std::string> parse_scontrol_node_addr(std::string_view text) {
  auto addr = value_after(text, "NodeAddr");
  if (!addr || addr->empty() || *addr == "(null)") return std::nullopt;
  return addr;
}

std::optional<int> parse_scontrol_kill_wait(std::string_view text) {
  auto value = value_after(text, "KillWait");
  if (!value) return std::nullopt;
  const auto n = to_number(*value);
  if (!n || *n > 100'000) return std::nullopt;
  return static_cast<int>(*n);
}

std::optional<std::string> parse_scontrol_end_time(std::string_view text) {
  auto value = value_after(text, "EndTime");
  // 2026-12-07T03:26:04: digits where the format has them.
  if (!value || value->size() != 19 || (*value)[4] != '-' || (*value)[10] != 'T') return std::nullopt;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if ((*value)[i] < '0' || (*value)[i] > '9') return std::nullopt;
  return value;
}

} // namespace air
