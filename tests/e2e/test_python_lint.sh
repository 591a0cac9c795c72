#!/usr/bin/env bash
# Lints the ranks' Python that air-run builds into its binary (core/**/python/*.py
# and the generated air_run_slots.py; docs/development.md, "The ranks' Python"):
# pyflakes when it is installed (Debian: pyflakes3), else a syntax check with
# the interpreter's compile() as the floor. A warning on a line that says
# `# noqa` is let through, as flake8 does (the shim imports the sitecustomize
# it shadows only to run it). Fails on any lint error.
set -u
root=${AIR_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 1
python=/usr/bin/python3
[ -x "$python" ] || python=python3

pyflakes=()
if command -v pyflakes3 >/dev/null 2>&1; then
  pyflakes=(pyflakes3)
elif "$python" -m pyflakes --version >/dev/null 2>&1; then
  pyflakes=("$python" -m pyflakes)
fi

# lint FILE...: prints each error; fails when there is one.
lint() {
  if [ ${#pyflakes[@]} -gt 0 ]; then
    local out line file number errors=0
    out=$("${pyflakes[@]}" "$@" 2>&1)
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      file=${line%%:*}
      number=$(echo "$line" | cut -d: -f2)
      if [[ $number =~ ^[0-9]+$ ]] && [ -f "$file" ] && sed -n "${number}p" "$file" | grep -q '# noqa'; then
        continue
      fi
      echo "$line"
      errors=$((errors + 1))
    done <<<"$out"
    [ "$errors" -eq 0 ]
  else
    # compile(), not py_compile: nothing written next to the sources.
    "$python" -c 'import sys
bad = 0
for path in sys.argv[1:]:
    try:
        compile(open(path, "rb").read(), path, "exec")
    except SyntaxError as e:
        print("%s:%s: %s" % (path, e.lineno, e.msg))
        bad += 1
sys.exit(1 if bad else 0)' "$@"
  fi
}

if [ ${#pyflakes[@]} -gt 0 ]; then
  echo "python lint: ${pyflakes[*]}"
else
  echo "python lint: pyflakes is not installed (Debian: pyflakes3): checking syntax only, with $python's compile()"
fi

mapfile -t files < <(git ls-files 'core/*.py')
# The generated slots, next to the binary under test when there is one.
build=$([ -n "${AIR_RUN:-}" ] && cd "$(dirname "$AIR_RUN")/.." && pwd || echo "$root/build")
slots=$build/generated/core/run/python/air_run_slots.py
if [ -f "$slots" ]; then files+=("$slots"); else echo "python lint: $slots not generated (configure the build): not linted"; fi
if [ ${#files[@]} -lt 7 ]; then
  echo "FAIL: expected the ranks' .py files under core/, found: ${files[*]}"
  exit 1
fi

failures=0
if ! lint "${files[@]}"; then
  echo "FAIL: lint errors in the ranks' Python"
  failures=1
fi

# The check itself must be able to fail: a planted error is reported, and a
# `# noqa` line is let through.
planted=$(mktemp -d)
trap 'rm -rf "$planted"' EXIT
printf 'import sys  # noqa: F401\n' >"$planted/quiet.py"
if ! lint "$planted/quiet.py" >/dev/null; then
  echo "FAIL: a '# noqa' line was reported"
  failures=1
fi
if [ ${#pyflakes[@]} -gt 0 ]; then
  printf 'def f():\n    return undefined_name\n' >"$planted/bad.py"
else
  printf 'def f(:\n' >"$planted/bad.py"
fi
if lint "$planted/bad.py" >/dev/null; then
  echo "FAIL: a planted lint error was not reported"
  failures=1
fi

[ "$failures" -eq 0 ] || exit 1
echo "python lint: ${#files[@]} files clean"
