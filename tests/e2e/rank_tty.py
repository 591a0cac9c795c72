"""Runs a command on a fresh pseudo-terminal, as a user's terminal would, and
keeps everything it writes there.

    python3 rank_tty.py OUT [--cols N] [--when TEXT --touch FILE [--resize M]] -- CMD...

OUT gets the raw bytes; the exit code is CMD's. With --when, FILE is created
as soon as TEXT has appeared on the terminal (escape codes left out) (a fixture waiting for FILE then
knows its unfinished line was seen); with --resize the terminal is first made
M columns wide, as a user's window is (the kernel sends SIGWINCH)."""

import fcntl
import os
import pty
import re
import struct
import sys
import termios


def main():
    args = sys.argv[1:]
    out_path = args.pop(0)
    cols, when, touch, resize = 200, None, None, None
    while args[0] != "--":
        flag = args.pop(0)
        if flag == "--cols":
            cols = int(args.pop(0))
        elif flag == "--when":
            when = args.pop(0).encode()
        elif flag == "--touch":
            touch = args.pop(0)
        elif flag == "--resize":
            resize = int(args.pop(0))
    command = args[1:]
    pid, master = pty.fork()
    if pid == 0:
        # The size before the command starts, as a terminal emulator has it:
        # air-run reads it once, then on SIGWINCH.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
        os.execvp(command[0], command)
    seen = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every copy of the terminal is closed
            break
        if not data:
            break
        seen += data
        # Colour codes may sit inside TEXT (a coloured rank prefix): look without them.
        if when is not None and touch and when in re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen):
            if resize:
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, resize, 0, 0))
            open(touch, "w").close()
            when = None
    with open(out_path, "wb") as f:
        f.write(seen)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
