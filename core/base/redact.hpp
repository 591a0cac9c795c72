#pragma once

#include <string>
#include <string_view>

namespace air {

/// The one rule for secrets air-run prints or writes (--dry-run, the JSON
/// summary, cached environment markers): a variable whose name looks secret
/// has its whole value hidden, and a URL's password (user:PASSWORD@host) is
/// hidden wherever it appears.
inline constexpr std::string_view k_redacted = "<redacted>";

/// Whether a variable's name looks secret: TOKEN, SECRET, PASSWORD, PASSWD,
/// KEY, CREDENTIAL or AUTH in any case ("HF_TOKEN", "aws_secret_access_key").
bool looks_secret(std::string_view name);

/// `text` with the credentials of every URL in it hidden: "https://bob:pw@h/"
/// becomes "https://bob:<redacted>@h/", "https://TOKEN@h/" becomes
/// "https://<redacted>@h/". Text without a URL comes back unchanged.
std::string redact_urls(std::string_view text);

/// A variable's value as it may be shown: `k_redacted` when the name looks
/// secret, else the value with URL credentials hidden.
std::string redact_variable(std::string_view name, std::string_view value);

} // namespace air
