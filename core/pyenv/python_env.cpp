// Requirements normalisation, cache keys and build plans: all pure.
#include "core/pyenv/python_env.hpp"

#include "core/base/sha256.hpp"
#include "core/base/text.hpp"

#include <algorithm>
#include <filesystem>

namespace air {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Runs of blanks become one space.
std::string collapse(std::string_view s) {
  std::string out;
  bool gap = false;
  for (char c : trim(s)) {
    if (is_blank(c)) {
      gap = true;
      continue;
    }
    if (gap) out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

std::string without_blanks(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (!is_blank(c)) out += c;
  }
  return out;
}

// PEP 503: lower case, runs of '-', '_' and '.' become one '-'.
std::string canonical_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += lower(c);
    }
  }
  return out;
}

bool has_scheme(std::string_view s) {
  const std::size_t colon = s.find("://");
  if (colon == std::string_view::npos || colon == 0) return false;
  return std::all_of(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(colon),
                     [](char c) { return is_alnum(c) || c == '+' || c == '-' || c == '.'; });
}

} // namespace

Expected<std::string> normalise_requirement(std::string_view text, const std::string& where) {
  const std::string_view req = trim(text);
  if (req.empty()) return usage_error(where + ": empty requirement");
  if (req.front() == '-') {
    const std::string option(req.substr(0, req.find_first_of(" \t=")));
    if (option == "-r" || option == "-c" || option == "--requirement" || option == "--constraint" ||
        req.rfind("-r", 0) == 0 || req.rfind("-c", 0) == 0) {
      return usage_error(where + ": " + single_quoted(collapse(req)) +
                         ": requirement file includes (-r/-c) are not supported; list the requirements "
                         "themselves");
    }
    return usage_error(where + ": " + single_quoted(collapse(req)) +
                       ": pip options are not supported in requirements; use environment.find_links, "
                       "environment.index_url or environment.no_index");
  }

  std::size_t i = 0;
  while (i < req.size() && is_name_char(req[i])) ++i;
  const std::string_view name = req.substr(0, i);
  std::size_t j = i;
  while (j < req.size() && is_blank(req[j])) ++j;
  // Only "name", "name[extras]...", "name<op>...", "name @ url" and "name; marker"
  // are requirement syntax; anything else (a path, a URL) is passed on as written.
  const bool named =
      !name.empty() && is_alnum(name.front()) &&
      (j == req.size() || std::string_view("[<>=!~(@;").find(req[j]) != std::string_view::npos);
  if (!named) return collapse(req);

  std::string out = canonical_name(name);
  std::string_view rest = req.substr(j);
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return collapse(req); // pip reports the syntax error
    std::string extras;
    for (char c : without_blanks(rest.substr(1, close - 1))) extras += lower(c);
    out += "[" + extras + "]";
    rest = trim(rest.substr(close + 1));
  }
  if (!rest.empty() && rest.front() == '@') {
    // "name @ url ; marker": the marker starts at a ';' after a blank.
    std::string_view url = trim(rest.substr(1));
    std::string marker;
    for (std::size_t k = 1; k < url.size(); ++k) {
      if (url[k] == ';' && is_blank(url[k - 1])) {
        marker = collapse(url.substr(k + 1));
        url = trim(url.substr(0, k));
        break;
      }
    }
    out += " @ " + std::string(url);
    if (!marker.empty()) out += " ; " + marker;
    return out;
  }
  const std::size_t semi = rest.find(';');
  out += without_blanks(rest.substr(0, semi));
  if (semi != std::string_view::npos) {
    const std::string marker = collapse(rest.substr(semi + 1));
    if (!marker.empty()) out += " ; " + marker;
  }
  return out;
}

Expected<std::vector<std::string>> normalise_requirements(const std::vector<std::string>& items,
                                                          const std::string& where) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    auto req = normalise_requirement(item, where);
    if (!req) return req.error();
    out.push_back(std::move(*req));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Expected<std::vector<std::string>> parse_requirements_text(std::string_view text, const std::string& path) {
  std::vector<std::string> out;
  std::string logical; // the current line with its continuations
  std::size_t logical_line = 0;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (logical.empty()) logical_line = line_no;
    // pip: a comment starts with '#' at the line start or after a blank.
    for (std::size_t k = 0; k < line.size(); ++k) {
      if (line[k] == '#' && (k == 0 || is_blank(line[k - 1]))) {
        line = line.substr(0, k);
        break;
      }
    }
    if (!line.empty() && line.back() == '\\') {
      logical += std::string(line.substr(0, line.size() - 1));
      continue;
    }
    logical += std::string(line);
    if (!trim(logical).empty()) {
      auto req = normalise_requirement(logical, path + ":" + std::to_string(logical_line));
      if (!req) return req.error();
      out.push_back(std::move(*req));
    }
    logical.clear();
  }
  if (!trim(logical).empty()) {
    auto req = normalise_requirement(logical, path + ":" + std::to_string(logical_line));
    if (!req) return req.error();
    out.push_back(std::move(*req));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string absolute_link(const std::string& link, const std::string& cwd) {
  if (link.empty() || has_scheme(link)) return link;
  std::filesystem::path p(link);
  if (p.is_relative()) p = std::filesystem::path(cwd) / p;
  std::string out = p.lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string env_key_text(const EnvRequest& request) {
  // One "name value" per line; the version line lets a format change start
  // new keys instead of misreading old environments.
  std::string text = "air-run-env 1\n";
  text += "python " + request.interpreter.path + "\n";
  text += "prefix " + request.interpreter.prefix + "\n";
  text += "version " + request.interpreter.version + "\n";
  text += std::string("system_site_packages ") + (request.system_site_packages ? "true" : "false") + "\n";
  text += std::string("no_index ") + (request.sources.no_index ? "true" : "false") + "\n";
  text += "index_url " + request.sources.index_url + "\n";
  for (const auto& link : request.sources.find_links) text += "find_links " + link + "\n";
  for (const auto& req : request.requirements) text += "requirement " + req + "\n";
  return text;
}

std::string env_key(const EnvRequest& request) { return sha256_hex(env_key_text(request)); }

std::string short_key(const std::string& key) { return key.substr(0, 12); }

std::vector<std::string> interpreter_probe_argv(const std::string& python) {
  return {python, "-S", "-c",
          "import sys; sys.stdout.write(sys.prefix + '\\n' + sys.version.replace('\\n', ' ') + '\\n')"};
}

Expected<InterpreterIdentity> parse_probe_output(std::string_view output, const std::string& realpath) {
  const std::size_t nl = output.find('\n');
  const std::size_t nl2 = nl == std::string_view::npos ? nl : output.find('\n', nl + 1);
  if (nl == std::string_view::npos || nl == 0 || nl2 == std::string_view::npos || nl2 == nl + 1 ||
      nl2 + 1 != output.size()) {
    return usage_error("environment.python " + realpath +
                       ": unexpected output when asked for its version: " + single_quoted(collapse(output)));
  }
  InterpreterIdentity id;
  id.path = realpath;
  id.prefix = std::string(output.substr(0, nl));
  id.version = std::string(output.substr(nl + 1, nl2 - nl - 1));
  return id;
}

EnvBuildPlan plan_env_build(const EnvRequest& request, const std::string& python, const std::string& dir) {
  EnvBuildPlan plan;
  plan.create = {python, "-m", "venv"};
  if (request.system_site_packages) plan.create.push_back("--system-site-packages");
  plan.create.push_back(dir);

  plan.requirements_file = dir + "/air-run-requirements.txt";
  for (const auto& req : request.requirements) plan.requirements_text += req + "\n";

  plan.install = {dir + "/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input"};
  if (request.sources.no_index) plan.install.push_back("--no-index");
  for (const auto& link : request.sources.find_links) {
    plan.install.push_back("--find-links");
    plan.install.push_back(link);
  }
  if (!request.sources.index_url.empty()) {
    plan.install.push_back("--index-url");
    plan.install.push_back(request.sources.index_url);
  }
  plan.install.push_back("-r");
  plan.install.push_back(plan.requirements_file);
  return plan;
}

} // namespace air
