// The control protocol's lines, formatted and parsed without the OS.
#include "core/cluster/control_message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace air {

namespace {

std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::string one_word(std::string_view text) {
  std::string out = one_line(text);
  for (char& c : out) {
    if (c == ' ' || c == '\t') c = '_';
  }
  return out.empty() ? "?" : out;
}

/// Splits off `count` space-separated words; the rest of the line (possibly
/// empty) is the last element.
std::vector<std::string_view> split_words(std::string_view line, std::size_t count) {
  std::vector<std::string_view> words;
  while (words.size() < count) {
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      words.push_back(line);
      line = {};
      break;
    }
    words.push_back(line.substr(0, space));
    line.remove_prefix(space + 1);
  }
  words.push_back(line);
  return words;
}

/// At most `max` bytes of `text`, not ending inside a UTF-8 character (the
/// text ends up in JSON reports).
std::string_view cut(std::string_view text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

/// A word of a `place` line: "-" stands for an empty one.
std::string place_word(std::string_view text) {
  if (text.empty()) return "-";
  return one_word(cut(text, k_max_place_word));
}

std::string format_place(const ControlMessage& m) {
  const HangRank& p = m.place;
  const std::string flags =
      fmt::format("{}{}{}", p.running ? 1 : 0, p.counted ? 1 : 0, p.in_collective ? 1 : 0);
  // Clamped as a double first: a NaN or a huge value must not reach the cast.
  const double ms = p.waiting_s * 1000;
  const long long waiting_ms = ms > 0 ? static_cast<long long>(std::min(ms, 999'999'999.0)) : 0;
  return fmt::format("place {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n", m.round, m.node_rank, m.count,
                     p.rank, flags, p.steps, p.collective_seq, waiting_ms, place_word(p.since),
                     p.nccl_enqueued ? std::to_string(*p.nccl_enqueued) : "-", place_word(p.nccl_op),
                     place_word(p.nccl_state), place_word(p.collective),
                     one_line(cut(p.place, k_max_place_text)));
}

/// A count of steps or collectives: up to 19 digits.
bool big_number(std::string_view word, std::uint64_t& out) {
  if (word.empty() || word.size() > 19) return false;
  std::uint64_t n = 0;
  for (char c : word) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = n;
  return true;
}

std::string from_place_word(std::string_view word) { return word == "-" ? std::string() : std::string(word); }

/// The largest count a preemption line carries: far beyond any real step
/// count or rate, and small enough that arithmetic on it cannot overflow.
constexpr std::uint64_t k_max_preempt_number = 999'999'999'999'999ULL;

std::uint64_t preempt_number(std::uint64_t n) { return std::min(n, k_max_preempt_number); }

/// A grace period in ms as a line carries it: 0 to 999,999,999 (11 days).
int grace_word(int ms) { return std::clamp(ms, 0, 999'999'999); }

} // namespace

std::string format_control_message(const ControlMessage& m) {
  switch (m.kind) {
  case ControlMessage::Kind::hello:
    return fmt::format("hello {} {} {} {} {}\n", k_control_protocol_version, m.node_rank, m.num_nodes,
                       m.ranks_per_node, one_word(m.name));
  case ControlMessage::Kind::start:
    if (!m.mlflow_run_id.empty()) {
      return fmt::format("start {} {} {} {} {} {}\n", m.node_rank, m.num_nodes, m.master_port,
                         one_word(m.text), one_word(m.mlflow_experiment_id), one_word(m.mlflow_run_id));
    }
    return fmt::format("start {} {} {} {}\n", m.node_rank, m.num_nodes, m.master_port, one_word(m.text));
  case ControlMessage::Kind::over:
    return fmt::format("over {} {}\n", m.node_rank, m.restartable ? 1 : 0);
  case ControlMessage::Kind::restart:
    if (m.node_rank >= 0)
      return fmt::format("restart {} {} {} {}\n", m.attempt, m.master_port, m.node_rank, m.num_nodes);
    return fmt::format("restart {} {}\n", m.attempt, m.master_port);
  case ControlMessage::Kind::nodes:
    return fmt::format("nodes {}\n", one_line(m.text));
  case ControlMessage::Kind::stop:
    return "stop\n";
  case ControlMessage::Kind::refuse:
    return fmt::format("refuse {} {}\n", m.exit_code, one_line(m.text));
  case ControlMessage::Kind::heartbeat:
    return "hb\n";
  case ControlMessage::Kind::fail:
  case ControlMessage::Kind::abort:
    return fmt::format("{} {} {} {} {} {}\n", m.kind == ControlMessage::Kind::fail ? "fail" : "abort",
                       m.node_rank, m.rank, m.exit_code, one_word(m.name), one_line(m.text));
  case ControlMessage::Kind::done:
    return fmt::format("done {}\n", m.node_rank);
  case ControlMessage::Kind::finish:
    return "finish\n";
  case ControlMessage::Kind::wait:
    return "wait\n";
  case ControlMessage::Kind::regroup:
    return fmt::format("regroup {}\n", one_line(m.text));
  case ControlMessage::Kind::quiet:
    return fmt::format("quiet {}\n", m.node_rank);
  case ControlMessage::Kind::where:
    return fmt::format("where {}\n", m.round);
  case ControlMessage::Kind::place:
    return format_place(m);
  case ControlMessage::Kind::work:
    return fmt::format("work {} {} {} {}{}\n", m.round, m.node_rank, m.place.rank, m.place.working ? 1 : 0,
                       m.place.exited_ok ? 1 : 0);
  case ControlMessage::Kind::busy:
    return fmt::format("busy {}\n", m.round);
  case ControlMessage::Kind::hung:
    return fmt::format("hung {} {} {} {} {}\n", m.node_rank, m.rank, m.exit_code, one_word(m.name),
                       one_line(m.text));
  case ControlMessage::Kind::preempt:
    return fmt::format("preempt {} {} {} {} {} {}\n", m.node_rank, m.signal, grace_word(m.grace_ms), m.count,
                       preempt_number(m.steps), preempt_number(m.rate_milli));
  case ControlMessage::Kind::count:
    return "count\n";
  case ControlMessage::Kind::counted:
    return fmt::format("counted {} {} {} {}\n", m.node_rank, m.count, preempt_number(m.steps),
                       preempt_number(m.rate_milli));
  case ControlMessage::Kind::stopat:
    return fmt::format("stopat {} {} {} {}\n", preempt_number(m.steps), m.signal, grace_word(m.grace_ms),
                       m.node_rank);
  case ControlMessage::Kind::stopped:
    return fmt::format("stopped {} {} {}\n", m.node_rank, m.count, m.stopped);
  }
  return "hb\n";
}

namespace {

/// A small number of a message (a node, a rank, a port, a code): at most nine
/// digits, and -1 for no rank.
bool small_number(std::string_view word, int& out) {
  const bool negative = !word.empty() && word.front() == '-';
  if (negative) word.remove_prefix(1);
  if (word.empty() || word.size() > 9) return false;
  int n = 0;
  for (const char c : word) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  out = negative ? -n : n;
  return true;
}

/// A count that cannot be negative.
bool natural(std::string_view word, int& out) { return small_number(word, out) && out >= 0; }

/// A preemption count (steps, a rate): bounded as the lines carry them.
bool preempt_count(std::string_view word, std::uint64_t& out) {
  return big_number(word, out) && out <= k_max_preempt_number;
}

/// One message's words after its verb, and how to refuse the line.
struct Words {
  std::string_view line;
  std::string_view verb;
  std::string_view rest;
  Error bad(const std::string& why) const {
    return usage_error(fmt::format("control message '{}': {}", line, why));
  }
  Error bad_number(std::string_view word) const { return bad(fmt::format("bad number '{}'", word)); }
};

using Parse = Expected<ControlMessage> (*)(const Words& in, ControlMessage m);

/// The verbs whose line is the verb alone.
Expected<ControlMessage> parse_bare(const Words& in, ControlMessage m) {
  if (!in.rest.empty()) return in.bad("unknown message");
  return m;
}

/// `regroup TEXT` and `nodes TEXT`: the rest of the line as it is.
Expected<ControlMessage> parse_text(const Words& in, ControlMessage m) {
  m.text = std::string(in.rest);
  return m;
}

Expected<ControlMessage> parse_start(const Words& in, ControlMessage m) {
  const auto w =
      split_words(in.rest, 6); // NODE NODES MASTER_PORT RUN_ID [MLFLOW_EXPERIMENT_ID MLFLOW_RUN_ID]
  const bool plain = w.size() == 5 && !w[3].empty() && w[4].empty();
  const bool tracked = w.size() == 7 && !w[3].empty() && !w[4].empty() && !w[5].empty() && w[6].empty();
  if (!plain && !tracked)
    return in.bad("expected 'start NODE NODES MASTER_PORT RUN_ID [MLFLOW_EXPERIMENT_ID MLFLOW_RUN_ID]'");
  if (tracked) {
    m.mlflow_experiment_id = std::string(w[4]);
    m.mlflow_run_id = std::string(w[5]);
  }
  if (!small_number(w[0], m.node_rank)) return in.bad_number(w[0]);
  if (!small_number(w[1], m.num_nodes)) return in.bad_number(w[1]);
  if (!small_number(w[2], m.master_port)) return in.bad_number(w[2]);
  m.text = std::string(w[3]);
  return m;
}

Expected<ControlMessage> parse_over(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 1);
  int flag = 0;
  if (w.size() != 2 || !small_number(w[0], m.node_rank) || !small_number(w[1], flag) ||
      (flag != 0 && flag != 1))
    return in.bad("expected 'over NODE 0|1'");
  m.restartable = flag == 1;
  return m;
}

Expected<ControlMessage> parse_restart(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 4);
  const bool plain = w.size() == 3 && w[2].empty();
  const bool regrouped = w.size() == 5 && w[4].empty();
  // A regrouped node is one of the nodes left: 0 <= NODE_RANK < NUM_NODES.
  if ((!plain && !regrouped) || !small_number(w[0], m.attempt) || !small_number(w[1], m.master_port) ||
      (regrouped && (!small_number(w[2], m.node_rank) || !small_number(w[3], m.num_nodes) ||
                     m.node_rank < 0 || m.node_rank >= m.num_nodes)))
    return in.bad("expected 'restart ATTEMPT MASTER_PORT [NODE_RANK NUM_NODES]'");
  return m;
}

Expected<ControlMessage> parse_refuse(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 1);
  if (!small_number(w[0], m.exit_code)) return in.bad_number(w[0]);
  m.text = w.size() > 1 ? std::string(w[1]) : std::string();
  return m;
}

Expected<ControlMessage> parse_done(const Words& in, ControlMessage m) {
  if (!small_number(in.rest, m.node_rank)) return in.bad_number(in.rest);
  return m;
}

Expected<ControlMessage> parse_hello(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 4);
  if (w.size() != 5 || w[4].empty() || w[4].find(' ') != std::string_view::npos)
    return in.bad("expected 'hello VERSION NODE NODES RANKS NAME'");
  int version = 0;
  if (!small_number(w[0], version)) return in.bad_number(w[0]);
  if (version != k_control_protocol_version)
    return in.bad(
        fmt::format("protocol version {}, this air-run speaks {}", version, k_control_protocol_version));
  if (!small_number(w[1], m.node_rank)) return in.bad_number(w[1]);
  if (!small_number(w[2], m.num_nodes)) return in.bad_number(w[2]);
  if (!small_number(w[3], m.ranks_per_node)) return in.bad_number(w[3]);
  m.name = std::string(w[4]);
  return m;
}

Expected<ControlMessage> parse_quiet(const Words& in, ControlMessage m) {
  if (!small_number(in.rest, m.node_rank) || m.node_rank < 0) return in.bad("expected 'quiet NODE'");
  return m;
}

Expected<ControlMessage> parse_where(const Words& in, ControlMessage m) {
  if (!small_number(in.rest, m.round) || m.round < 1) return in.bad("expected 'where ROUND'");
  return m;
}

Expected<ControlMessage> parse_place(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 13); // 13 words, then PLACE
  HangRank& p = m.place;
  int waiting_ms = 0;
  std::uint64_t nccl = 0;
  const bool shaped = w.size() == 14 && w[4].size() == 3 &&
                      std::all_of(w.begin(), w.begin() + 13, [](std::string_view x) { return !x.empty(); });
  if (!shaped || !small_number(w[0], m.round) || m.round < 1 || !small_number(w[1], m.node_rank) ||
      m.node_rank < 0 || !small_number(w[2], m.count) || m.count < 1 || !small_number(w[3], p.rank) ||
      p.rank < 0 || !big_number(w[5], p.steps) || !big_number(w[6], p.collective_seq) ||
      !small_number(w[7], waiting_ms) || waiting_ms < 0 || (w[9] != "-" && !big_number(w[9], nccl)))
    return in.bad("expected 'place ROUND NODE COUNT RANK FLAGS STEPS SEQ WAITING_MS SINCE NCCL_SEQ NCCL_OP "
                  "NCCL_STATE COLLECTIVE PLACE'");
  bool flags[3] = {};
  for (std::size_t i = 0; i < 3; ++i) {
    if (w[4][i] != '0' && w[4][i] != '1') return in.bad(fmt::format("bad flags '{}'", w[4]));
    flags[i] = w[4][i] == '1';
  }
  p.running = flags[0];
  p.counted = flags[1];
  p.in_collective = flags[2];
  p.waiting_s = waiting_ms / 1000.0;
  p.since = from_place_word(w[8]);
  if (w[9] != "-") p.nccl_enqueued = nccl;
  p.nccl_op = from_place_word(w[10]);
  p.nccl_state = from_place_word(w[11]);
  p.collective = from_place_word(w[12]);
  p.place = std::string(w[13]);
  p.node = m.node_rank;
  return m;
}

Expected<ControlMessage> parse_work(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 4);
  const bool shaped = w.size() == 5 && w[4].empty() && w[3].size() == 2 &&
                      (w[3][0] == '0' || w[3][0] == '1') && (w[3][1] == '0' || w[3][1] == '1');
  if (!shaped || !small_number(w[0], m.round) || m.round < 1 || !small_number(w[1], m.node_rank) ||
      m.node_rank < 0 || !small_number(w[2], m.place.rank) || m.place.rank < 0)
    return in.bad("expected 'work ROUND NODE RANK FLAGS'");
  m.place.working = w[3][0] == '1';
  m.place.exited_ok = w[3][1] == '1';
  m.place.node = m.node_rank;
  return m;
}

Expected<ControlMessage> parse_busy(const Words& in, ControlMessage m) {
  if (!small_number(in.rest, m.round) || m.round < 1) return in.bad("expected 'busy ROUND'");
  return m;
}

// Preemption: every number is a count (>= 0); a node and a signal too.

Expected<ControlMessage> parse_preempt(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 6);
  if (w.size() != 7 || !w[6].empty() || !natural(w[0], m.node_rank) || !natural(w[1], m.signal) ||
      m.signal == 0 || m.signal > 64 || !natural(w[2], m.grace_ms) || !natural(w[3], m.count) ||
      !preempt_count(w[4], m.steps) || !preempt_count(w[5], m.rate_milli))
    return in.bad("expected 'preempt NODE SIGNAL GRACE_MS POLLING STEPS RATE_MILLI'");
  return m;
}

Expected<ControlMessage> parse_counted(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 4);
  if (w.size() != 5 || !w[4].empty() || !natural(w[0], m.node_rank) || !natural(w[1], m.count) ||
      !preempt_count(w[2], m.steps) || !preempt_count(w[3], m.rate_milli))
    return in.bad("expected 'counted NODE POLLING STEPS RATE_MILLI'");
  return m;
}

Expected<ControlMessage> parse_stopat(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 4);
  if (w.size() != 5 || !w[4].empty() || !preempt_count(w[0], m.steps) || !natural(w[1], m.signal) ||
      m.signal == 0 || m.signal > 64 || !natural(w[2], m.grace_ms) || !natural(w[3], m.node_rank))
    return in.bad("expected 'stopat STEP SIGNAL GRACE_MS NODE'");
  return m;
}

Expected<ControlMessage> parse_stopped(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 3);
  if (w.size() != 4 || !w[3].empty() || !natural(w[0], m.node_rank) || !natural(w[1], m.count) ||
      !natural(w[2], m.stopped) || m.stopped > m.count)
    return in.bad("expected 'stopped NODE ASKED STOPPED'");
  return m;
}

/// `fail`, `abort` and `hung`: a node's failure, node 0's stop for it, or for a hang.
Expected<ControlMessage> parse_failure(const Words& in, ControlMessage m) {
  const auto w = split_words(in.rest, 4);
  if (w.size() != 5 || w[3].empty())
    return in.bad(fmt::format("expected '{} NODE RANK CODE NAME TEXT'", in.verb));
  if (!small_number(w[0], m.node_rank)) return in.bad_number(w[0]);
  if (!small_number(w[1], m.rank)) return in.bad_number(w[1]);
  if (!small_number(w[2], m.exit_code)) return in.bad_number(w[2]);
  m.name = std::string(w[3]);
  m.text = std::string(w[4]);
  return m;
}

/// The protocol's vocabulary: each verb, the kind it makes and how its words are read.
struct Verb {
  std::string_view word;
  ControlMessage::Kind kind;
  Parse parse;
};

using K = ControlMessage::Kind;
constexpr Verb k_verbs[] = {
    {"hb", K::heartbeat, parse_bare},       {"finish", K::finish, parse_bare},
    {"stop", K::stop, parse_bare},          {"wait", K::wait, parse_bare},
    {"count", K::count, parse_bare},        {"regroup", K::regroup, parse_text},
    {"nodes", K::nodes, parse_text},        {"start", K::start, parse_start},
    {"over", K::over, parse_over},          {"restart", K::restart, parse_restart},
    {"refuse", K::refuse, parse_refuse},    {"done", K::done, parse_done},
    {"hello", K::hello, parse_hello},       {"quiet", K::quiet, parse_quiet},
    {"where", K::where, parse_where},       {"place", K::place, parse_place},
    {"work", K::work, parse_work},          {"busy", K::busy, parse_busy},
    {"preempt", K::preempt, parse_preempt}, {"counted", K::counted, parse_counted},
    {"stopat", K::stopat, parse_stopat},    {"fail", K::fail, parse_failure},
    {"abort", K::abort, parse_failure},     {"hung", K::hung, parse_failure},
    {"stopped", K::stopped, parse_stopped},
};

} // namespace

Expected<ControlMessage> parse_control_message(std::string_view line) {
  const std::size_t space = line.find(' ');
  Words in;
  in.line = line;
  in.verb = line.substr(0, space);
  in.rest = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  for (const Verb& v : k_verbs) {
    if (v.word != in.verb) continue;
    ControlMessage m;
    m.kind = v.kind;
    return v.parse(in, std::move(m));
  }
  return in.bad("unknown message");
}

} // namespace air
