#include "core/hang/diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace air {
namespace {

/// Paths of code that is not the user's: the interpreter's library, installed
/// packages (torch), air's own package (its private modules, air.data, the
/// TorchDistributor) and the shim. A rank inside air.data.save is placed at
/// the user's line that called it, which is where a fix goes.
constexpr std::string_view k_not_user_code[] = {
    "/site-packages/",  "/dist-packages/",           "/lib/python3",     "/pyshim/", "/air/_", "/air/data/",
    "/air/__init__.py", "/air/torch_distributor.py", "/air_run_warm.py", "<frozen "};

bool user_code(std::string_view file) {
  return std::none_of(std::begin(k_not_user_code), std::end(k_not_user_code),
                      [&](std::string_view marker) { return file.find(marker) != std::string_view::npos; });
}

/// `  File "/x/train.py", line 12 in stuck_here` -> {"/x/train.py", "12", "stuck_here"}.
struct Frame {
  std::string_view file, line, function;
};

std::optional<Frame> parse_frame(std::string_view text) {
  const std::size_t open = text.find("File \"");
  if (open == std::string_view::npos) return std::nullopt;
  const std::size_t close = text.find("\", line ", open + 6);
  if (close == std::string_view::npos) return std::nullopt;
  Frame f;
  f.file = text.substr(open + 6, close - open - 6);
  const std::size_t num = close + 8;
  const std::size_t in = text.find(" in ", num);
  f.line = text.substr(num, (in == std::string_view::npos ? text.size() : in) - num);
  if (in != std::string_view::npos) f.function = text.substr(in + 4);
  return f;
}

std::string_view base_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string describe(const Frame& f) {
  return fmt::format("{} at {}:{}", f.function.empty() ? "?" : f.function, base_name(f.file), f.line);
}

/// The part of the dump that is the main thread: the last thread listed
/// (faulthandler lists the newest thread first, and the main one is the oldest).
std::string_view main_thread(std::string_view dump) {
  std::size_t start = std::string_view::npos;
  for (std::string_view marker : {"Thread 0x", "Current thread 0x"}) {
    std::size_t at = dump.rfind(marker);
    while (at != std::string_view::npos && at > 0 && dump[at - 1] != '\n') // a line's start only
      at = at == 0 ? std::string_view::npos : dump.rfind(marker, at - 1);
    if (at != std::string_view::npos && (start == std::string_view::npos || at > start)) start = at;
  }
  return start == std::string_view::npos ? dump : dump.substr(start);
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return std::string(n == 1 ? one : many);
}

} // namespace

std::string user_place(std::string_view dump) {
  const std::string_view thread = main_thread(dump);
  std::optional<Frame> innermost;
  std::size_t begin = 0;
  while (begin < thread.size()) {
    std::size_t end = thread.find('\n', begin);
    if (end == std::string_view::npos) end = thread.size();
    const std::string_view line = thread.substr(begin, end - begin);
    begin = end + 1;
    if (line.find("(most recent call first)") != std::string_view::npos && innermost) break; // next thread
    const auto frame = parse_frame(line);
    if (!frame) continue;
    if (!innermost) innermost = frame;
    if (user_code(frame->file)) return describe(*frame);
  }
  return innermost ? describe(*innermost) : std::string();
}

std::string rank_words(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

namespace {

/// Every running rank waits, but not all in the same collective: they called
/// different ones (rank 0 alone in air.data.save's broadcast_object_list, the
/// others in the barrier after it), and each waits for the others forever.
/// No rank is behind, so none is a laggard; the line groups the ranks by the
/// collective they wait in, in rank order:
/// "ranks wait in different collectives: rank 0 in broadcast_object_list #4
/// at save at train.py:9 since 12:01:03; ranks 1 and 2 in barrier #4 at ...".
std::optional<std::string> mismatch_line(const std::vector<const HangRank*>& waiting,
                                         const std::vector<const HangRank*>& outside) {
  if (!outside.empty() || waiting.size() < 2) return std::nullopt;
  const bool one_name = std::all_of(waiting.begin(), waiting.end(), [&](const HangRank* r) {
    return r->collective == waiting.front()->collective;
  });
  if (one_name) return std::nullopt;
  std::vector<const HangRank*> sorted = waiting;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const HangRank* a, const HangRank* b) { return a->rank < b->rank; });
  // Groups in the order of their first rank; a group is one collective at one place.
  std::vector<std::vector<const HangRank*>> groups;
  for (const HangRank* r : sorted) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.front()->collective == r->collective && g.front()->collective_seq == r->collective_seq &&
             g.front()->place == r->place;
    });
    if (same == groups.end())
      groups.push_back({r});
    else
      same->push_back(r);
  }
  std::string line = "ranks wait in different collectives: ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    std::vector<int> ids;
    std::string since = g.front()->since;
    for (const HangRank* r : g) {
      ids.push_back(r->rank);
      since = std::min(since, r->since);
    }
    const HangRank& first = *g.front();
    const std::string who = ids.size() == 1 && first.node >= 0
                                ? fmt::format("rank {} (node {})", first.rank, first.node)
                                : fmt::format("{} {}", plural(ids.size(), "rank", "ranks"), rank_words(ids));
    if (i > 0) line += "; ";
    line += fmt::format("{} in {} #{} at {} since {}", who, first.collective, first.collective_seq,
                        first.place.empty() ? std::string("an unknown place (no Python stack)") : first.place,
                        since);
  }
  return line;
}

} // namespace

HangDiagnosis diagnose_hang(const std::vector<HangRank>& ranks) {
  HangDiagnosis d;
  std::vector<const HangRank*> waiting, outside;
  std::uint64_t max_seq = 0;
  for (const auto& r : ranks) {
    if (!r.running) continue;
    if (r.in_collective) {
      waiting.push_back(&r);
      max_seq = std::max(max_seq, r.collective_seq);
    } else {
      outside.push_back(&r);
    }
  }
  if (auto line = mismatch_line(waiting, outside)) {
    d.line = std::move(*line);
    return d;
  }
  // Who is behind: outside any collective while others wait in one; else,
  // all waiting, those in an earlier collective than the latest.
  std::vector<const HangRank*> behind, ahead;
  if (!waiting.empty() && !outside.empty()) {
    behind = outside;
    ahead = waiting;
  } else if (waiting.size() > 1) {
    for (const HangRank* r : waiting) (r->collective_seq < max_seq ? behind : ahead).push_back(r);
    if (behind.empty()) ahead.clear();
  }
  bool by_nccl = false;
  if (behind.empty()) {
    std::uint64_t max_enqueued = 0;
    std::size_t recorded = 0;
    for (const auto& r : ranks) {
      if (!r.running || !r.nccl_enqueued) continue;
      ++recorded;
      max_enqueued = std::max(max_enqueued, *r.nccl_enqueued);
    }
    if (recorded > 1) {
      for (const auto& r : ranks) {
        if (!r.running || !r.nccl_enqueued) continue;
        (*r.nccl_enqueued < max_enqueued ? behind : ahead).push_back(&r);
      }
      by_nccl = !behind.empty();
      if (!by_nccl) ahead.clear();
    }
  }
  for (const HangRank* r : behind) d.laggards.push_back(r->rank);

  const auto place_of = [](const HangRank& r) {
    return r.place.empty() ? std::string("an unknown place (no Python stack)") : r.place;
  };
  // Across nodes a laggard's node is named too: that is where to look.
  const auto who = [](const HangRank& r) {
    return r.node < 0 ? fmt::format("rank {}", r.rank) : fmt::format("rank {} (node {})", r.rank, r.node);
  };
  std::vector<std::string> parts;
  if (by_nccl) {
    // The ranks' own Python places, with NCCL's sequence saying who is behind.
    for (const HangRank* r : behind)
      parts.push_back(fmt::format("{} is in {}, its last NCCL collective #{} ({}, {})", who(*r), place_of(*r),
                                  *r->nccl_enqueued, r->nccl_op, r->nccl_state));
    std::map<std::uint64_t, std::vector<const HangRank*>> groups;
    for (const HangRank* r : ahead) groups[*r->nccl_enqueued].push_back(r);
    for (const auto& [seq, members] : groups) {
      std::vector<int> ids;
      for (const HangRank* r : members) ids.push_back(r->rank);
      const HangRank* first = members.front();
      parts.push_back(fmt::format("{} {} enqueued NCCL collective #{} ({}, {}) at {}",
                                  plural(ids.size(), "rank", "ranks"), rank_words(ids), seq, first->nccl_op,
                                  first->nccl_state, place_of(*first)));
    }
  } else if (!behind.empty()) {
    for (const HangRank* r : behind) {
      if (r->in_collective)
        parts.push_back(fmt::format("{} waits in {} #{} at {} since {}", who(*r), r->collective,
                                    r->collective_seq, place_of(*r), r->since));
      else
        parts.push_back(fmt::format("{} is in {}", who(*r), place_of(*r)));
    }
    // Ranks waiting in the same collective at the same place share a clause.
    std::map<std::tuple<std::string, std::uint64_t, std::string>, std::vector<const HangRank*>> groups;
    for (const HangRank* r : ahead) groups[{r->collective, r->collective_seq, place_of(*r)}].push_back(r);
    for (const auto& [key, members] : groups) {
      std::vector<int> ids;
      std::string since = members.front()->since;
      for (const HangRank* r : members) {
        ids.push_back(r->rank);
        since = std::min(since, r->since);
      }
      parts.push_back(fmt::format("{} {} {} in {} #{} at {} since {}", plural(ids.size(), "rank", "ranks"),
                                  rank_words(ids), plural(ids.size(), "waits", "wait"), std::get<0>(key),
                                  std::get<1>(key), std::get<2>(key), since));
    }
  } else {
    for (const auto& r : ranks) {
      if (!r.running) continue;
      if (r.in_collective)
        parts.push_back(fmt::format("rank {} waits in {} #{} at {} since {}", r.rank, r.collective,
                                    r.collective_seq, place_of(r), r.since));
      else
        parts.push_back(fmt::format("rank {} is in {}", r.rank, place_of(r)));
    }
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) d.line += "; ";
    d.line += parts[i];
  }
  return d;
}

std::vector<Straggler> find_stragglers(const std::vector<StepStats>& ranks, const StragglerRule& rule) {
  std::vector<Straggler> out;
  if (ranks.size() < 2) return out;
  std::vector<double> busy_ms;
  for (const auto& r : ranks) {
    if (r.steps < rule.min_steps) return out; // too early to judge anyone
    busy_ms.push_back(static_cast<double>(r.busy_ns) / 1e6 / static_cast<double>(r.steps));
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    std::vector<double> others;
    for (std::size_t j = 0; j < ranks.size(); ++j)
      if (j != i) others.push_back(busy_ms[j]);
    std::sort(others.begin(), others.end());
    const std::size_t n = others.size();
    const double median = n % 2 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
    const double slower = busy_ms[i] - median;
    if (slower < rule.min_slower_ms || slower < rule.min_slower_ratio * std::max(median, 0.0)) continue;
    Straggler s;
    s.rank = ranks[i].rank;
    s.busy_ms = busy_ms[i];
    s.others_ms = median;
    s.slower_ms = slower;
    out.push_back(s);
  }
  return out;
}

std::string straggler_line(const Straggler& s) {
  std::string line =
      fmt::format("rank {} is a straggler: {:.0f} ms a step outside collectives, the others {:.0f} ms",
                  s.rank, s.busy_ms, s.others_ms);
  if (!s.gpu.empty()) line += " (" + s.gpu + ")";
  return line;
}

} // namespace air
