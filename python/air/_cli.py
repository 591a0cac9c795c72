"""The `air-run` command of the wheel: runs the air-run binary packaged with
this package (air/bin/air-run) with the same arguments, as the cmake and
ninja wheels run theirs."""

import os
import sys

from air import _binary


def main():
    path = _binary.packaged_binary()
    if path is None:
        sys.stderr.write("air-run: this air package was installed without the air-run binary "
                         "(a wheel built without one); install the platform wheel or the .deb "
                         "(docs/install.md)\n")
        return 127
    os.execv(path, [path] + sys.argv[1:])
    return 127  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
