#!/bin/sh
# Makes the `air` Python package of this checkout importable by each given
# interpreter (default: /usr/bin/python3 and python3 on PATH), without pip or
# PyPI: writes an `air-run.pth` file naming <repo>/python into the
# interpreter's site-packages (sysconfig's purelib; the user site when that is
# not writable). Idempotent: an identical .pth is left alone.
#
#   scripts/install-python.sh [--remove] [PYTHON...]
#
# Where pip and setuptools exist, `pip install ./python` works too.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
pkg_root="$repo/python"
remove=0
if [ "${1:-}" = "--remove" ]; then
  remove=1
  shift
fi
if [ "$#" -eq 0 ]; then
  set -- /usr/bin/python3 python3
fi

status=0
seen=""
for py in "$@"; do
  if ! command -v "$py" >/dev/null 2>&1; then
    echo "install-python: skip $py: not found" >&2
    continue
  fi
  # One line: the interpreter, its purelib, whether purelib is on sys.path, the user site.
  info=$("$py" - <<'PYEOF'
import os, site, sys, sysconfig
purelib = sysconfig.get_paths()["purelib"]
on_path = any(os.path.realpath(p) == os.path.realpath(purelib) for p in sys.path if p)
user = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
print("%s\t%s\t%d\t%s" % (sys.executable, purelib, on_path, user))
PYEOF
) || { echo "install-python: $py: could not query its site-packages" >&2; status=1; continue; }
  exe=$(printf '%s' "$info" | cut -f1)
  purelib=$(printf '%s' "$info" | cut -f2)
  on_path=$(printf '%s' "$info" | cut -f3)
  usersite=$(printf '%s' "$info" | cut -f4)

  target=""
  if [ "$on_path" = 1 ] && { [ -w "$purelib" ] || { [ ! -e "$purelib" ] && mkdir -p "$purelib" 2>/dev/null; }; }; then
    target="$purelib"
  elif [ -n "$usersite" ]; then
    mkdir -p "$usersite" && target="$usersite"
  fi
  if [ -z "$target" ]; then
    echo "install-python: $exe: neither $purelib nor a user site-packages is writable" >&2
    status=1
    continue
  fi
  case " $seen " in *" $target "*) echo "install-python: $exe: $target already done"; continue ;; esac
  seen="$seen $target"
  pth="$target/air-run.pth"

  if [ "$remove" = 1 ]; then
    if [ -e "$pth" ]; then rm -f "$pth" && echo "install-python: $exe: removed $pth"; fi
    continue
  fi
  if [ -f "$pth" ] && [ "$(cat "$pth")" = "$pkg_root" ]; then
    echo "install-python: $exe: $pth already present"
  else
    tmp="$pth.tmp.$$"
    printf '%s\n' "$pkg_root" > "$tmp" && mv -f "$tmp" "$pth"
    echo "install-python: $exe: wrote $pth -> $pkg_root"
  fi
  # Check from a neutral directory that this checkout's package is the one imported.
  got=$(cd / && "$py" -c 'import air, os; print(os.path.dirname(os.path.dirname(os.path.abspath(air.__file__))))' 2>&1) || got="import failed: $got"
  if [ "$got" != "$pkg_root" ]; then
    echo "install-python: $exe: 'import air' gives $got, not $pkg_root (another air package first on sys.path?)" >&2
    status=1
  fi
done
exit $status
