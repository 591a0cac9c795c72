// The run's HTML page: a header that reads as text, one time axis with a
// lane per rank (or per group of alike ranks), the attempts as bands, the
// hang, stragglers and preemption as marked lines, and the GPUs' readings.
// Every mark has a shape and a label besides its colour, so the page reads
// printed in black and white.
#include "core/report/html_page.hpp"

#include "core/report/html_style.hpp"
#include "core/run/python_traceback.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace air {

namespace {

using Json = nlohmann::ordered_json;

// ---- reading the summaries, leniently ----

const Json* field(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  // The object's own map, not json's iterator: g++ 14 at -O2 warns
  // -Wnull-dereference inside that iterator's operator-> (a false positive).
  const auto& object = j.get_ref<const Json::object_t&>();
  const auto it = object.find(key);
  return it == object.end() || it->second.is_null() ? nullptr : &it->second;
}
double num(const Json& j, const char* key, double fallback = 0) {
  const Json* f = field(j, key);
  return f != nullptr && f->is_number() ? f->get<double>() : fallback;
}
bool has_num(const Json& j, const char* key) {
  const Json* f = field(j, key);
  return f != nullptr && f->is_number();
}
std::string str(const Json& j, const char* key) {
  const Json* f = field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : std::string();
}
bool flag(const Json& j, const char* key) {
  const Json* f = field(j, key);
  return f != nullptr && f->is_boolean() && f->get<bool>();
}
const Json& arr(const Json& j, const char* key) {
  static const Json empty = Json::array();
  const Json* f = field(j, key);
  return f != nullptr && f->is_array() ? *f : empty;
}
const Json& obj(const Json& j, const char* key) {
  static const Json empty = Json::object();
  const Json* f = field(j, key);
  return f != nullptr && f->is_object() ? *f : empty;
}

std::string esc(const std::string& s) { return html_escape(s); }

std::string cut(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t end = n;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80)
    --end; // not inside a UTF-8 character
  return s.substr(0, end) + "…";
}

std::string seconds_text(double s) {
  if (s < 0) s = 0;
  if (s < 60) return fmt::format("{:.1f} s", s);
  const long total = std::lround(s);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m{:02}s", total / 3600, (total / 60) % 60, total % 60);
}

// ---- the job, as the page sees it ----

/// One rank, from its node's summary: how it ended and its timeline.
struct Rank {
  int rank = 0;
  int node = 0;
  double offset = 0; ///< its node's start, in seconds after the page's
  const Json* summary_rank = nullptr;
  const Json* lane = nullptr; ///< timeline.ranks entry, nullptr without one
  std::string exit_kind;      ///< "ok", "failed", "stopped", "not-started"
  std::string exit_text;      ///< "exit code 1: ValueError: bad (train.py:27)"
  bool outlier = false;
  std::string why_outlier;
};

/// What is drawn as one lane: one rank, or several alike.
struct Lane {
  std::vector<const Rank*> ranks;
  std::string label;
};

struct Page {
  std::vector<const Json*> docs; ///< by node rank
  const Json* main = nullptr;    ///< node 0's (or the first) summary
  double t0 = 0;                 ///< the earliest node's start (epoch seconds)
  double span = 1;               ///< seconds the axis covers
  std::vector<Rank> ranks;
  std::set<int> stragglers, laggards;
  int root_cause = -1;
  double max_rate = 0;
};

std::string rank_exit_text(const Json& r) {
  std::string text = str(obj(r, "exit"), "description");
  const Json& error = obj(r, "error");
  std::string what = str(error, "type");
  const std::string message = str(error, "message");
  if (!message.empty()) what += what.empty() ? message : ": " + message;
  if (const auto where = innermost_frame(str(error, "traceback")))
    what += fmt::format(" ({}:{})", where->file.substr(where->file.rfind('/') + 1), where->line);
  if (!what.empty() && str(error, "source") != "output_tail")
    text += ": " + what;
  else if (!str(r, "last_line").empty() && !flag(r, "stopped_by_air_run") &&
           str(error, "source") == "output_tail")
    text += ": " + str(r, "last_line");
  if (flag(r, "oom_killed")) text += " (OOM killer)";
  return text;
}

std::string rank_exit_kind(const Json& r) {
  const Json& exit = obj(r, "exit");
  if (str(exit, "description") == "not started" || !has_num(r, "pid")) return "not-started";
  if (flag(r, "stopped_by_air_run")) return "stopped";
  if (has_num(exit, "code") && num(exit, "code") == 0) return "ok";
  return "failed";
}

double rate_max(const Json& steps) {
  double best = 0;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    const double dt = steps[i][0].get<double>() - steps[i - 1][0].get<double>();
    const double dv = steps[i][1].get<double>() - steps[i - 1][1].get<double>();
    if (dt > 0 && dv > 0) best = std::max(best, dv / dt);
  }
  return best;
}

bool well_formed_series(const Json& s) {
  if (!s.is_array()) return false;
  for (const Json& p : s)
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) return false;
  return true;
}

Page read_page(const std::vector<const Json*>& summaries) {
  Page page;
  for (const Json* doc : summaries)
    if (doc != nullptr && doc->is_object()) page.docs.push_back(doc);
  std::stable_sort(page.docs.begin(), page.docs.end(), [](const Json* a, const Json* b) {
    return num(obj(*a, "launch"), "node_rank") < num(obj(*b, "launch"), "node_rank");
  });
  if (page.docs.empty()) return page;
  page.main = page.docs.front();
  double end = 0;
  page.t0 = 0;
  for (const Json* doc : page.docs) {
    const double start = parse_utc_seconds(str(*doc, "started_at"));
    if (start > 0 && (page.t0 == 0 || start < page.t0)) page.t0 = start;
  }
  for (const Json* doc : page.docs) {
    const double start = parse_utc_seconds(str(*doc, "started_at"));
    const double offset = start > 0 && page.t0 > 0 ? start - page.t0 : 0;
    end = std::max(end, offset + num(*doc, "duration_s"));
    const int node = static_cast<int>(num(obj(*doc, "launch"), "node_rank"));
    const Json& lanes = arr(obj(*doc, "timeline"), "ranks");
    for (const Json& r : arr(*doc, "ranks")) {
      Rank rank;
      rank.rank = static_cast<int>(num(r, "rank"));
      rank.node = node;
      rank.offset = offset;
      rank.summary_rank = &r;
      for (const Json& lane : lanes)
        if (num(lane, "rank", -1) == rank.rank) rank.lane = &lane;
      if (rank.lane != nullptr && !well_formed_series(arr(*rank.lane, "steps"))) rank.lane = nullptr;
      rank.exit_kind = rank_exit_kind(r);
      rank.exit_text = rank_exit_text(r);
      if (rank.lane != nullptr) page.max_rate = std::max(page.max_rate, rate_max(arr(*rank.lane, "steps")));
      page.ranks.push_back(std::move(rank));
    }
    for (const Json& s : arr(*doc, "stragglers"))
      page.stragglers.insert(static_cast<int>(num(s, "rank", -1)));
    for (const Json& l : arr(obj(obj(*doc, "outcome"), "hang"), "laggards"))
      if (l.is_number()) page.laggards.insert(l.get<int>());
  }
  std::stable_sort(page.ranks.begin(), page.ranks.end(),
                   [](const Rank& a, const Rank& b) { return a.rank < b.rank; });
  page.root_cause = static_cast<int>(num(obj(*page.main, "outcome"), "root_cause_rank", -1));
  for (Rank& r : page.ranks) {
    if (r.rank == page.root_cause)
      r.why_outlier = "root cause";
    else if (page.stragglers.count(r.rank) != 0)
      r.why_outlier = "straggler";
    else if (page.laggards.count(r.rank) != 0)
      r.why_outlier = "behind in the hang";
    else if (r.exit_kind == "failed")
      r.why_outlier = "failed";
    else if (r.exit_kind == "not-started")
      r.why_outlier = "not started";
    r.outlier = !r.why_outlier.empty();
  }
  page.span = std::max(end, 0.001);
  return page;
}

/// The lanes: one per rank up to k_html_lane_limit, else the outliers alone
/// and the others grouped by node and how they ended, in runs of ranks.
std::vector<Lane> make_lanes(const Page& page) {
  std::vector<Lane> lanes;
  if (page.ranks.size() <= k_html_lane_limit) {
    for (const Rank& r : page.ranks) lanes.push_back({{&r}, fmt::format("rank {}", r.rank)});
    return lanes;
  }
  std::map<std::pair<int, std::string>, std::size_t> open; // (node, exit) -> its lane
  for (const Rank& r : page.ranks) {
    if (r.outlier) {
      lanes.push_back({{&r}, fmt::format("rank {} ({})", r.rank, r.why_outlier)});
      continue;
    }
    const auto key =
        std::make_pair(r.node, r.exit_kind + "|" + str(obj(*r.summary_rank, "exit"), "description"));
    const auto it = open.find(key);
    if (it == open.end()) {
      open[key] = lanes.size();
      lanes.push_back({{&r}, ""});
    } else {
      lanes[it->second].ranks.push_back(&r);
    }
  }
  for (Lane& lane : lanes) {
    if (!lane.label.empty()) continue;
    std::vector<int> ids;
    for (const Rank* r : lane.ranks) ids.push_back(r->rank);
    std::string list;
    for (std::size_t i = 0; i < ids.size();) {
      std::size_t j = i;
      while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
      if (!list.empty()) list += ",";
      list += i == j ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
      i = j + 1;
    }
    lane.label = lane.ranks.size() == 1 ? "rank " + list
                                        : fmt::format("node {} ranks {} ({})", lane.ranks.front()->node,
                                                      cut(list, 24), lane.ranks.size());
  }
  return lanes;
}

// ---- drawing ----

constexpr double k_left = 170;   ///< room for the lane labels
constexpr double k_width = 1000; ///< the axis' width in SVG units
constexpr double k_lane_h = 22;
constexpr double k_top = 44; ///< room for the attempts' labels and the axis

struct Axis {
  double span = 1;
  double x(double t) const { return k_left + std::clamp(t / span, 0.0, 1.0) * k_width; }
};

std::string f1(double v) { return fmt::format("{:.1f}", v); }

/// A tick's label: "0", "30s", "5m", "3h", "1h30m", "2d".
std::string tick_text(double t) {
  const long s = std::lround(t);
  if (t > 0 && t < 10 && std::fabs(t - static_cast<double>(s)) > 1e-6) return fmt::format("{:.1f}s", t);
  if (s == 0) return "0";
  if (s % 86400 == 0) return fmt::format("{}d", s / 86400);
  if (s % 3600 == 0) return fmt::format("{}h", s / 3600);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s % 60 == 0) return fmt::format("{}m", s / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string axis_ticks(const Axis& axis, double y_top, double y_bottom) {
  // About eight ticks, at round numbers of seconds, minutes or hours.
  static const double steps[] = {0.1, 0.2, 0.5,  1,    2,    5,     10,    15,    30,    60,     120,   300,
                                 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800};
  double step = steps[sizeof steps / sizeof steps[0] - 1];
  for (const double s : steps)
    if (axis.span / s <= 8) {
      step = s;
      break;
    }
  std::string out = "<g class=\"axis\">";
  for (double t = 0; t <= axis.span + 1e-9; t += step) {
    const double x = axis.x(t);
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"tick\"/>"
                       "<text x=\"{0}\" y=\"{3}\" class=\"tick-label\">{4}</text>",
                       f1(x), f1(y_top), f1(y_bottom), f1(y_top - 3), esc(tick_text(t)));
  }
  return out + "</g>";
}

std::string marker(const char* kind, double x, double y, const std::string& title,
                   const std::string& extra = "") {
  // Shapes tell the kinds apart without colour: a triangle for the first
  // step, a circle for a clean exit, a cross for a failure, a square for a
  // rank air-run stopped, a bar for the start.
  const std::string k = kind;
  std::string shape;
  if (k == "first-step")
    shape = fmt::format("<path d=\"M{} {}l5 8h-10z\"/>", f1(x), f1(y - 4));
  else if (k == "start")
    shape = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"2\" height=\"12\"/>", f1(x - 1), f1(y - 6));
  else if (k == "exit-ok")
    shape = fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\"/>", f1(x), f1(y));
  else if (k == "exit-stopped" || k == "exit-not-started")
    shape = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"8\" height=\"8\"/>", f1(x - 4), f1(y - 4));
  else if (k == "straggler")
    shape = fmt::format("<path d=\"M{} {}l4 4l-4 4l-4 -4z\"/>", f1(x), f1(y - 4));
  else
    shape = fmt::format("<path d=\"M{0} {1}l8 8m0 -8l-8 8\" class=\"cross\"/>", f1(x - 4), f1(y - 4));
  const std::string data_kind = k.rfind("exit", 0) == 0 ? "exit" : k;
  return fmt::format("<g class=\"marker m-{}\" data-kind=\"{}\"{}>{}<title>{}</title></g>", k, data_kind,
                     extra, shape, esc(title));
}

std::string rate_path(const Json& steps, double offset, const Axis& axis, double y_base, double height,
                      double max_rate) {
  if (steps.size() < 2 || max_rate <= 0) return {};
  // One filled step outline per stretch of counting: down to the base line
  // where a restart counts from 0 again, so attempts do not join.
  std::string d;
  bool open = false;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    const double t0 = steps[i - 1][0].get<double>() + offset, t1 = steps[i][0].get<double>() + offset;
    const double dv = steps[i][1].get<double>() - steps[i - 1][1].get<double>();
    if (t1 <= t0 || dv < 0) {
      if (open) d += fmt::format("V{}Z", f1(y_base));
      open = false;
      continue;
    }
    const double y = y_base - (dv / (t1 - t0)) / max_rate * height;
    if (!open) d += fmt::format("M{} {}", f1(axis.x(t0)), f1(y_base));
    d += fmt::format("V{}H{}", f1(y), f1(axis.x(t1)));
    open = true;
  }
  if (open) d += fmt::format("V{}Z", f1(y_base));
  if (d.empty()) return {};
  return fmt::format("<path class=\"rate\" d=\"{}\"/>", d);
}

std::string lane_svg(const Page& page, const Lane& lane, std::size_t index, const Axis& axis) {
  const double y = k_top + static_cast<double>(index) * k_lane_h;
  const double mid = y + k_lane_h / 2;
  const Rank& head = *lane.ranks.front();
  std::string ids;
  for (const Rank* r : lane.ranks) ids += (ids.empty() ? "" : " ") + std::to_string(r->rank);
  std::string out =
      fmt::format("<g class=\"lane{}\" id=\"lane-{}\" data-rank=\"{}\" data-ranks=\"{}\" data-count=\"{}\" "
                  "data-node=\"{}\" "
                  "data-exit=\"{}\">",
                  head.outlier ? " outlier" : "", index, head.rank,
                  lane.ranks.size() > 8 ? cut(ids, 60) : ids, lane.ranks.size(), head.node, head.exit_kind);
  out += fmt::format("<rect class=\"lane-bg{}\" x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
                     index % 2 ? " odd" : "", f1(y), f1(k_left + k_width + 10), f1(k_lane_h));
  out += fmt::format("<text class=\"lane-label\" x=\"4\" y=\"{}\">{}</text>", f1(mid + 4),
                     esc(cut(lane.label, 30)));
  const std::string group_note =
      lane.ranks.size() > 1 ? fmt::format(" (and {} alike)", lane.ranks.size() - 1) : "";
  if (head.lane != nullptr) {
    const Json& spans = arr(*head.lane, "spans");
    for (std::size_t s = 0; s < spans.size(); ++s) {
      const Json& span = spans[s];
      if (!has_num(span, "started_s")) continue;
      const double start = num(span, "started_s") + head.offset;
      const double end = has_num(span, "ended_s") ? num(span, "ended_s") + head.offset : page.span;
      out += fmt::format(
          "<rect class=\"span\" data-attempt=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
          num(span, "attempt"), f1(axis.x(start)), f1(y + 3), f1(std::max(1.0, axis.x(end) - axis.x(start))),
          f1(k_lane_h - 6));
      out += marker("start", axis.x(start), mid,
                    fmt::format("rank {}{} started at {} (attempt {})", head.rank, group_note,
                                seconds_text(start), num(span, "attempt")));
      if (has_num(span, "first_step_s")) {
        const double first = num(span, "first_step_s") + head.offset;
        out += marker("first-step", axis.x(first), mid,
                      fmt::format("rank {}: first step at {}", head.rank, seconds_text(first)));
      }
      if (s + 1 < spans.size() && has_num(span, "ended_s")) {
        // An earlier attempt's end: a cross on the rank whose failure ended it.
        const Json* ended = nullptr;
        for (const Json& a : arr(obj(*page.main, "outcome"), "attempts"))
          if (num(a, "attempt", -1) == num(span, "attempt")) ended = &a;
        const bool cause = ended != nullptr && num(*ended, "root_cause_rank", -1) == head.rank;
        const std::string why = cause ? ": " + str(*ended, "reason") : std::string();
        out += marker(cause ? "exit-failed" : "exit-stopped", axis.x(end), mid,
                      fmt::format("rank {}: attempt {} ended at {}{}", head.rank, num(span, "attempt"),
                                  seconds_text(end), why),
                      " data-attempt-end=\"1\"");
      }
    }
    for (const Json& q : arr(*head.lane, "quiet")) {
      if (!q.is_array() || q.size() != 2 || !q[0].is_number() || !q[1].is_number()) continue;
      const double from = q[0].get<double>() + head.offset, to = q[1].get<double>() + head.offset;
      out += fmt::format(
          "<rect class=\"quiet\" data-kind=\"quiet\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">"
          "<title>rank {}: quiet {} (no output line, no step) from {}</title></rect>",
          f1(axis.x(from)), f1(y + 3), f1(std::max(1.0, axis.x(to) - axis.x(from))), f1(k_lane_h - 6),
          head.rank, seconds_text(to - from), seconds_text(from));
    }
    out +=
        rate_path(arr(*head.lane, "steps"), head.offset, axis, y + k_lane_h - 3, k_lane_h - 7, page.max_rate);
  }
  // The exit: where the rank's last span ended, or the run's end.
  double end = page.span;
  if (head.lane != nullptr) {
    const Json& spans = arr(*head.lane, "spans");
    if (!spans.empty() && has_num(spans.back(), "ended_s")) end = num(spans.back(), "ended_s") + head.offset;
  } else {
    end = std::min(page.span, num(*head.summary_rank, "duration_s") + head.offset);
  }
  const std::string steps = has_num(*head.summary_rank, "steps")
                                ? fmt::format(", {} steps", num(*head.summary_rank, "steps"))
                                : std::string();
  out += marker(
      ("exit-" + head.exit_kind).c_str(), axis.x(end), mid,
      fmt::format("rank {}{}: {}{} at {}", head.rank, group_note, head.exit_text, steps, seconds_text(end)));
  if (head.exit_kind == "failed" || head.outlier) {
    const bool right = axis.x(end) > k_left + k_width * 0.6;
    out += fmt::format("<text class=\"exit-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>",
                       f1(axis.x(end) + (right ? -8 : 8)), f1(mid + 4), right ? "end" : "start",
                       esc(cut(head.exit_text, 90)));
  }
  if (page.stragglers.count(head.rank) != 0) {
    for (const Json* doc : page.docs)
      for (const Json& s : arr(*doc, "stragglers"))
        if (num(s, "rank", -1) == head.rank) {
          std::string text =
              fmt::format("rank {} is a straggler: {:.1f} ms per step outside collectives, others {:.1f}",
                          head.rank, num(s, "ms_per_step"), num(s, "others_ms_per_step"));
          if (!str(s, "gpu").empty()) text += "; " + str(s, "gpu");
          out += marker("straggler", k_left - 10, mid, text, fmt::format(" data-rank=\"{}\"", head.rank));
        }
  }
  return out + "</g>";
}

std::string attempts_svg(const Page& page, const Axis& axis, double height) {
  std::string out;
  const Json& attempts = arr(obj(*page.main, "outcome"), "attempts");
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const Json& a = attempts[i];
    double from = parse_utc_seconds(str(a, "started_at")) - page.t0;
    double to = parse_utc_seconds(str(a, "ended_at")) - page.t0;
    if (page.t0 == 0 || from < 0) from = 0;
    if (page.t0 == 0 || to <= from) to = page.span;
    const std::string status = str(a, "status");
    const bool last = i + 1 == attempts.size();
    std::string why = status;
    if (!str(a, "reason").empty()) why += ": " + str(a, "reason");
    if (!str(a, "error").empty() && why.find(str(a, "error")) == std::string::npos)
      why += " (" + str(a, "error") + ")";
    if (!last) why += "; restarted";
    // Labels take turns on two rows and are cut to their band (about 6
    // units a character), so that short attempts side by side stay legible.
    const double band = std::max(1.0, axis.x(to) - axis.x(from));
    const double room = std::max(band, i + 1 == attempts.size() ? k_left + k_width - axis.x(from) : band * 2);
    const auto chars = static_cast<std::size_t>(std::max(4.0, room / 6.2));
    out += fmt::format(
        "<g class=\"attempt a{}\" id=\"attempt-{}\" data-attempt=\"{}\" data-status=\"{}\">"
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>"
        "<text class=\"attempt-label\" x=\"{}\" y=\"{}\">{}</text><title>attempt {}: {}</title></g>",
        i % 2, num(a, "attempt"), num(a, "attempt"), esc(status), f1(axis.x(from)), f1(k_top - 16), f1(band),
        f1(height - k_top + 16), f1(axis.x(from) + 3), i % 2 == 0 ? 11 : 24,
        esc(cut(fmt::format("attempt {} · {}", num(a, "attempt"), why), chars)), num(a, "attempt"), esc(why));
  }
  return out;
}

std::string vertical_marker(const char* kind, double x, double y_top, double y_bottom,
                            const std::string& label, const std::string& title) {
  return fmt::format(
      "<g class=\"marker event {0}\" data-kind=\"{0}\"><line x1=\"{1}\" y1=\"{2}\" x2=\"{1}\" "
      "y2=\"{3}\"/><text x=\"{4}\" y=\"{5}\" text-anchor=\"end\">{6}</text><title>{7}</title></g>",
      kind, f1(x), f1(y_top), f1(y_bottom), f1(x - 3), f1(y_bottom - 4), esc(label), esc(title));
}

std::string timeline_svg(const Page& page, const std::vector<Lane>& lanes) {
  const Axis axis{page.span};
  const double height = k_top + static_cast<double>(lanes.size()) * k_lane_h + 20; // the events' labels below
  std::string out = fmt::format("<svg id=\"timeline-svg\" class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" "
                                "aria-label=\"timeline of the run, one lane per rank\">",
                                f1(k_left + k_width + 20), f1(height));
  out +=
      "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" class=\"hatch\"/></pattern>"
      "<pattern id=\"dots\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\"><circle cx=\"2\" "
      "cy=\"2\" "
      "r=\"0.8\" class=\"dot\"/></pattern></defs>";
  out += attempts_svg(page, axis, height);
  out += axis_ticks(axis, k_top - 2, height - 4);
  out += "<g id=\"lanes\">";
  for (std::size_t i = 0; i < lanes.size(); ++i) out += lane_svg(page, lanes[i], i, axis);
  out += "</g>";
  const Json& outcome = obj(*page.main, "outcome");
  if (const Json* hang = field(outcome, "hang")) {
    const double at = parse_utc_seconds(str(*hang, "at")) - page.t0;
    out += vertical_marker("hang", axis.x(page.t0 > 0 ? at : page.span), k_top - 2, height - 2,
                           fmt::format("hang named after {} quiet", seconds_text(num(*hang, "quiet_s"))),
                           str(*hang, "diagnosis"));
  }
  if (const Json* pre = field(outcome, "preemption")) {
    const Json& tl = obj(*page.main, "timeline");
    const double main_offset = parse_utc_seconds(str(*page.main, "started_at")) - page.t0;
    const double at = has_num(tl, "preempted_at_s") ? num(tl, "preempted_at_s") + main_offset : page.span;
    const std::string step = has_num(*pre, "stop_step")
                                 ? fmt::format("stop at step {}", num(*pre, "stop_step"))
                                 : std::string("stop at once");
    out += vertical_marker(
        "preemption", axis.x(at), k_top - 2, height - 2, fmt::format("{}: {}", str(*pre, "signal"), step),
        fmt::format("preempted by {}: every polling rank asked to {}", str(*pre, "signal"), step));
  }
  return out + "</svg>";
}

std::string gpu_charts(const Page& page) {
  struct Metric {
    const char* key;
    const char* title;
    const char* unit;
  };
  static const Metric metrics[] = {{"utilization_pct", "GPU utilization", "%"},
                                   {"memory_used_mib", "GPU memory used", "MiB"},
                                   {"power_w", "power", "W"},
                                   {"temperature_c", "temperature", "°C"}};
  std::vector<std::pair<std::string, std::pair<const Json*, double>>> gpus; // name, (gpu, node offset)
  for (const Json* doc : page.docs) {
    const double offset = page.t0 > 0 ? parse_utc_seconds(str(*doc, "started_at")) - page.t0 : 0;
    const int node = static_cast<int>(num(obj(*doc, "launch"), "node_rank"));
    int index = 0;
    for (const Json& g : arr(obj(*doc, "timeline"), "gpus"))
      gpus.push_back({page.docs.size() > 1 ? fmt::format("node {} GPU {}", node, index++)
                                           : fmt::format("GPU {}", index++),
                      {&g, offset}});
  }
  if (gpus.empty()) return {};
  const Axis axis{page.span};
  std::string out = "<section id=\"gpus\"><h2>GPU readings (NVML)</h2>";
  bool any = false;
  for (const Metric& m : metrics) {
    double top = 0;
    for (const auto& g : gpus)
      for (const Json& p : arr(*g.second.first, m.key))
        if (p.is_array() && p.size() == 2 && p[1].is_number()) top = std::max(top, p[1].get<double>());
    if (top <= 0) continue;
    if (std::string(m.key) == "utilization_pct") top = 100;
    any = true;
    const double h = 90;
    out += fmt::format(
        "<figure class=\"gpu-chart\" data-metric=\"{}\"><figcaption>{} ({}), top {:.0f}</figcaption>"
        "<svg class=\"chart\" viewBox=\"0 0 {} {}\">",
        m.key, m.title, m.unit, top, f1(k_left + k_width + 20), f1(h + 20));
    out += axis_ticks(axis, 12, h + 12);
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      std::string points;
      for (const Json& p : arr(*gpus[i].second.first, m.key)) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) continue;
        const double x = axis.x(p[0].get<double>() + gpus[i].second.second);
        const double y = 12 + h - p[1].get<double>() / top * h;
        points += (points.empty() ? "" : " ") + f1(x) + "," + f1(y);
      }
      if (points.empty()) continue;
      // Dash patterns tell the GPUs apart in print; the label names each.
      out += fmt::format("<g class=\"gpu-line\" data-gpu=\"{}\"><polyline class=\"d{}\" points=\"{}\"/>"
                         "<text x=\"4\" y=\"{}\" class=\"lane-label\">{} {}</text><title>{} {}</title></g>",
                         esc(str(*gpus[i].second.first, "uuid")), i % 4, points,
                         f1(24 + 12 * static_cast<double>(i)), esc(gpus[i].first),
                         i % 4 == 0   ? "—"
                         : i % 4 == 1 ? "- -"
                         : i % 4 == 2 ? "···"
                                      : "-·-",
                         esc(gpus[i].first), esc(str(*gpus[i].second.first, "uuid")));
    }
    out += "</svg></figure>";
  }
  return any ? out + "</section>" : std::string();
}

std::string header_html(const Page& page) {
  const Json& doc = *page.main;
  const Json& outcome = obj(doc, "outcome");
  const std::string status = str(outcome, "status");
  std::string command;
  for (const Json& part : arr(obj(obj(obj(doc, "spec"), "settings"), "command"), "value"))
    if (part.is_string()) command += (command.empty() ? "" : " ") + part.get<std::string>();
  std::string nodes;
  for (const Json* d : page.docs) {
    const Json& launch = obj(*d, "launch");
    const std::string name = str(launch, "node_name").empty() ? str(*d, "host") : str(launch, "node_name");
    nodes += (nodes.empty() ? "" : ", ") + fmt::format("{} ({})", name, num(launch, "node_rank"));
  }
  const Json& launch = obj(doc, "launch");
  const double nodes_expected = num(launch, "num_nodes", 1);
  if (static_cast<double>(page.docs.size()) < nodes_expected)
    nodes += fmt::format("; {} of {} nodes' summaries given", page.docs.size(), nodes_expected);
  std::string out =
      fmt::format("<header id=\"summary\" data-status=\"{}\" data-exit-code=\"{}\" data-ranks=\"{}\">",
                  esc(status), num(outcome, "exit_code"), page.ranks.size());
  out += fmt::format("<h1>air-run {} <span class=\"status s-{}\">{}</span></h1>", esc(str(doc, "run_id")),
                     esc(status), esc(status == "succeeded" ? "succeeded" : "✗ " + status));
  out += "<dl class=\"facts\">";
  const auto fact = [&out](const char* name, const std::string& value, const char* id) {
    out += fmt::format("<dt>{}</dt><dd id=\"fact-{}\">{}</dd>", name, id, value);
  };
  fact("status", esc(status), "status");
  fact("exit code", fmt::format("{}", num(outcome, "exit_code")), "exit-code");
  fact("duration", esc(seconds_text(page.span)), "duration");
  fact("started", esc(str(doc, "started_at")), "started");
  fact("command", "<code>" + esc(cut(command, 400)) + "</code>", "command");
  fact("ranks", fmt::format("{} (world size {})", page.ranks.size(), num(launch, "world_size")), "ranks");
  fact("nodes", esc(nodes), "nodes");
  const int restarts = static_cast<int>(num(outcome, "restarts"));
  if (restarts > 0) fact("restarts", std::to_string(restarts), "restarts");
  const Json& mlflow = obj(doc, "mlflow");
  if (!str(mlflow, "link").empty()) {
    const std::string link = str(mlflow, "link");
    // A link the reader follows by choice; the page itself fetches nothing.
    const bool web = link.rfind("http://", 0) == 0 || link.rfind("https://", 0) == 0;
    fact("MLflow run",
         web ? fmt::format("<a href=\"{0}\" rel=\"noreferrer\">{0}</a>", esc(link))
             : "<code>" + esc(link) + "</code>",
         "mlflow");
  }
  out += "</dl>";
  if (!str(outcome, "reason").empty())
    out += "<p class=\"reason\" id=\"reason\">" + esc(str(outcome, "reason")) + "</p>";
  return out + "</header>";
}

std::string hang_html(const Page& page) {
  const Json* hang = field(obj(*page.main, "outcome"), "hang");
  if (hang == nullptr) return {};
  std::string out = "<section id=\"hang\"><h2>The hang</h2>";
  out += fmt::format("<p>No rank made progress for {}; named at {}.</p>",
                     esc(seconds_text(num(*hang, "quiet_s"))), esc(str(*hang, "at")));
  if (!str(*hang, "diagnosis").empty())
    out += "<p class=\"diagnosis\">" + esc(str(*hang, "diagnosis")) + "</p>";
  out += "<table><thead><tr><th>rank</th><th>node</th><th>steps</th><th>where</th><th>waiting in</th>"
         "<th>waiting for</th></tr></thead><tbody>";
  // At many ranks, ranks in the same place share a row ("0, 2-1023"), as lanes do.
  struct Row {
    std::vector<int> ranks;
    std::string node, steps, place, waiting_in, waiting_for;
    bool behind = false;
  };
  std::vector<Row> rows;
  const Json& listed = arr(*hang, "ranks");
  for (const Json& r : listed) {
    Row row;
    row.ranks.push_back(static_cast<int>(num(r, "rank", -1)));
    row.behind = page.laggards.count(row.ranks.front()) != 0;
    row.node = has_num(r, "node") ? fmt::format("{}", num(r, "node")) : "";
    row.steps = has_num(r, "steps") ? fmt::format("{}", num(r, "steps")) : "";
    row.place = str(r, "place");
    const std::string coll = str(r, "collective");
    row.waiting_in = coll.empty() ? "" : fmt::format("{} #{}", coll, num(r, "collective_seq"));
    row.waiting_for = has_num(r, "waiting_s") ? seconds_text(num(r, "waiting_s")) : "";
    if (listed.size() > 16 && !rows.empty() && !row.behind && !rows.back().behind &&
        rows.back().node == row.node && rows.back().steps == row.steps && rows.back().place == row.place &&
        rows.back().waiting_in == row.waiting_in) {
      rows.back().ranks.push_back(row.ranks.front());
      continue;
    }
    rows.push_back(std::move(row));
  }
  for (const Row& row : rows) {
    std::string ids;
    for (std::size_t i = 0; i < row.ranks.size();) {
      std::size_t j = i;
      while (j + 1 < row.ranks.size() && row.ranks[j + 1] == row.ranks[j] + 1) ++j;
      ids += (ids.empty() ? "" : ", ") +
             (i == j ? std::to_string(row.ranks[i]) : fmt::format("{}-{}", row.ranks[i], row.ranks[j]));
      i = j + 1;
    }
    out += fmt::format(
        "<tr class=\"hang-rank{}\" data-rank=\"{}\" data-count=\"{}\"><td>{}{}</td><td>{}</td><td>{}"
        "</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
        row.behind ? " behind" : "", row.ranks.front(), row.ranks.size(), esc(ids),
        row.behind ? " (behind)" : "", row.node, row.steps, esc(row.place), esc(row.waiting_in),
        esc(row.waiting_for));
  }
  return out + "</tbody></table></section>";
}

std::string details_html(const Page& page) {
  std::string out;
  bool any = false;
  std::string rows;
  for (const Json* doc : page.docs)
    for (const Json& s : arr(*doc, "stragglers")) {
      any = true;
      rows += fmt::format("<tr data-rank=\"{}\"><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{}</td></tr>",
                          num(s, "rank"), num(s, "rank"), num(s, "ms_per_step"), num(s, "others_ms_per_step"),
                          esc(str(s, "gpu")));
    }
  if (any)
    out += "<section id=\"stragglers\"><h2>Stragglers</h2><table><thead><tr><th>rank</th><th>ms per step</th>"
           "<th>others' median</th><th>GPU readings</th></tr></thead><tbody>" +
           rows + "</tbody></table></section>";
  if (const Json* pre = field(obj(*page.main, "outcome"), "preemption")) {
    std::string asked, stopped;
    for (const Json& r : arr(*pre, "asked_ranks")) asked += (asked.empty() ? "" : ", ") + r.dump();
    for (const Json& r : arr(*pre, "stopped_ranks")) stopped += (stopped.empty() ? "" : ", ") + r.dump();
    out += fmt::format(
        "<section id=\"preemption\"><h2>Preemption</h2><p>{} came; {}. Asked: ranks {}; stopped "
        "there: ranks {}.{}</p></section>",
        esc(str(*pre, "signal")),
        has_num(*pre, "stop_step")
            ? fmt::format("every polling rank was asked to stop at step {}", num(*pre, "stop_step"))
            : std::string("the ranks were asked to stop at once"),
        esc(asked.empty() ? "none" : asked), esc(stopped.empty() ? "none" : stopped),
        str(*pre, "checkpoint").empty() ? ""
                                        : " Checkpoint: <code>" + esc(str(*pre, "checkpoint")) + "</code>.");
  }
  return out;
}

std::string ranks_table(const Page& page, const std::vector<Lane>& lanes) {
  std::string out =
      "<section id=\"ranks\"><h2>How each rank ended</h2><table><thead><tr><th>rank</th><th>node</th>"
      "<th>ended</th><th>steps</th><th>duration</th></tr></thead><tbody>";
  for (const Lane& lane : lanes) {
    const Rank& r = *lane.ranks.front();
    out +=
        fmt::format("<tr class=\"e-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    r.exit_kind, esc(lane.label), r.node, esc(r.exit_text),
                    has_num(*r.summary_rank, "steps") ? fmt::format("{}", num(*r.summary_rank, "steps")) : "",
                    esc(seconds_text(num(*r.summary_rank, "duration_s"))));
  }
  (void)page;
  return out + "</tbody></table></section>";
}

std::string legend_html() {
  return "<p class=\"legend\">Each lane is a rank: a bar from its start to its exit; ▲ first step; the "
         "filled "
         "steps show its step rate (higher: faster); hatched: quiet (no output line, no step for at least "
         "5 s); ● exited 0, ✕ failed, ■ stopped by air-run; ◆ straggler. Bands behind the lanes are the "
         "attempts, each labelled with how it ended; vertical lines mark a hang and a preemption. Hover a "
         "mark "
         "for its details.</p>";
}

} // namespace

double parse_utc_seconds(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double s = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf", &y, &mo, &d, &h, &mi, &s) != 6) return 0;
  if (mo < 1 || mo > 12 || d < 1 || d > 31) return 0;
  // Days from the civil date (Howard Hinnant's algorithm): no timegm, no time zone.
  const int yy = y - (mo <= 2 ? 1 : 0);
  const int era = (yy >= 0 ? yy : yy - 399) / 400;
  const int yoe = yy - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long days = static_cast<long>(era) * 146097 + doe - 719468;
  return static_cast<double>(days) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f ? '?' : c;
    }
  }
  return out;
}

std::string html_page(const std::vector<Json>& summaries) {
  std::vector<const Json*> docs;
  for (const Json& doc : summaries) docs.push_back(&doc);
  return html_page_of(docs);
}

std::string html_page_of(const std::vector<const Json*>& summaries) {
  const Page page = read_page(summaries);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  if (page.main == nullptr) {
    return out + "<title>air-run</title><style>" + std::string(k_html_style) +
           "</style></head><body><header id=\"summary\"><h1>air-run: no "
           "summary</h1></header></body></html>\n";
  }
  const std::string status = str(obj(*page.main, "outcome"), "status");
  out += fmt::format("<title>air-run {}: {}</title><style>{}</style></head><body>",
                     esc(str(*page.main, "run_id")), esc(status), k_html_style);
  const std::vector<Lane> lanes = make_lanes(page);
  out += header_html(page);
  out += fmt::format("<section id=\"timeline\" data-lanes=\"{}\" data-attempts=\"{}\"><h2>Timeline</h2>",
                     lanes.size(), arr(obj(*page.main, "outcome"), "attempts").size());
  if (lanes.size() < page.ranks.size())
    out += fmt::format(
        "<p class=\"grouped\">{} ranks drawn as {} lane(s): ranks that ended alike on a node share one; "
        "the root cause, failed ranks, stragglers and ranks behind in a hang keep their own.</p>",
        page.ranks.size(), lanes.size());
  out += timeline_svg(page, lanes) + legend_html() + "</section>";
  out += hang_html(page);
  out += details_html(page);
  out += gpu_charts(page);
  out += ranks_table(page, lanes);
  out += fmt::format("<footer>Drawn by air-run {} from {} summar{} (schema {}, timeline {}). This file is "
                     "self-contained: it loads nothing.</footer></body></html>\n",
                     esc(str(*page.main, "air_run_version")), page.docs.size(),
                     page.docs.size() == 1 ? "y" : "ies", num(*page.main, "schema_version"),
                     num(obj(*page.main, "timeline"), "version"));
  return out;
}

} // namespace air
