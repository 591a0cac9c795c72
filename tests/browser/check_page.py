#!/usr/bin/env python3
"""Loads an air-run HTML page in headless Chromium and checks what a person
would see, from the browser's own DOM and screenshot:

- the lanes, attempt bands and markers that the summary says the run has
  (counted in the DOM Chromium built, --dump-dom);
- that nothing was fetched: the page text names no external source, and
  Chromium runs with a proxy that is a local listener recording every
  connection: any fetch would reach it;
- that the screenshot is not blank (its pixels decoded here with zlib: enough
  non-white pixels and distinct colours).

usage: check_page.py PAGE.html SUMMARY.json [MORE.json ...] [--screenshot OUT.png]
Exit 0 when every check passes, 1 with the failures listed, 77 when no
Chromium is installed.
"""
import html.parser
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import zlib

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
                  "--no-pings", "--disable-domain-reliability", "--disable-client-side-phishing-detection",
                  "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter"]

# What Chromium itself asks for, whatever the page (its clock, its updater,
# its sign-in), when flags do not stop it: these hosts and nothing else are
# not the page's. A font or script CDN (fonts.googleapis.com, gstatic.com,
# jsdelivr...) is not among them, so a page that fetches one fails.
# Chromium 150 (Debian 12's main archive, what a fresh minbase root gets; 156
# from its security archive does not) also opens `CONNECT www.google.com:443`
# at start, for any page; a page that names that host (or any other) still
# fails the check of its text (static_check).
BROWSER_OWN = re.compile(r"^(GET|POST|CONNECT) (http://)?(clients\d?\.google\.com|update\.googleapis\.com|"
                         r"accounts\.google\.com|safebrowsing\.googleapis\.com|"
                         r"optimizationguide-pa\.googleapis\.com|redirector\.gvt1\.com)[:/]"
                         r"|^CONNECT www\.google\.com:443 ")


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Listener:
    """A TCP listener on loopback that records every connection made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(1)
            try:
                self.connections.append(conn.recv(200).decode("latin-1", "replace").splitlines()[:1])
                # An answer at once, so that the browser gives up on it without retrying.
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                self.connections.append(["(no request line)"])
            conn.close()

    def close(self):
        self.sock.close()


def run_chromium(chromium, proxy_port, args, timeout=60):
    profile = tempfile.mkdtemp(prefix="air-chromium-")
    try:
        cmd = [chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile,
                                             "--proxy-server=http://127.0.0.1:%d" % proxy_port,
                                             "--proxy-bypass-list=<-loopback>"] + args
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return done.stdout.decode("utf-8", "replace")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Counter(html.parser.HTMLParser):
    """Counts the page's marked elements in the DOM Chromium dumped."""

    def __init__(self):
        super().__init__()
        self.lanes, self.lane_ranks, self.attempts, self.kinds = 0, 0, 0, {}
        self.tags = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        classes = (a.get("class") or "").split()
        if tag == "g" and "lane" in classes:
            self.lanes += 1
            self.lane_ranks += int(a.get("data-count", "1"))
        if tag == "g" and "attempt" in classes:
            self.attempts += 1
        if "data-kind" in a:
            self.kinds[a["data-kind"]] = self.kinds.get(a["data-kind"], 0) + 1


def png_pixels(path):
    """(width, height, set of distinct colours, non-white pixel count) of an
    8-bit RGB or RGBA PNG, decoded with zlib and the PNG filters."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "unexpected PNG format"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours, non_white = set(), 0
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            ul = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + left) & 255
            elif f == 2:
                line[i] = (line[i] + up) & 255
            elif f == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        for x in range(0, stride, bpp * 4):  # every fourth pixel is plenty
            px = bytes(line[x:x + 3])
            colours.add(px)
            if px != b"\xff\xff\xff":
                non_white += 1
        prev = line
    return width, height, colours, non_white


def expected_from(summaries):
    """What the page must show, from the summaries alone."""
    ranks, first_steps, quiet, spans = 0, 0, 0, 0
    attempts = len((summaries[0].get("outcome") or {}).get("attempts") or [])
    for doc in summaries:
        ranks += len(doc.get("ranks") or [])
        for lane in (doc.get("timeline") or {}).get("ranks") or []:
            spans += sum(1 for s in lane["spans"] if s.get("started_s") is not None)
            first_steps += sum(1 for s in lane["spans"] if s.get("first_step_s") is not None)
            quiet += len(lane["quiet"])
    return {"ranks": ranks, "attempts": attempts, "first-step": first_steps, "quiet": quiet, "start": spans,
            "hang": 1 if (summaries[0].get("outcome") or {}).get("hang") else 0,
            "preemption": 1 if (summaries[0].get("outcome") or {}).get("preemption") else 0,
            "straggler": sum(len(d.get("stragglers") or []) for d in summaries)}


def static_check(text):
    """Everything in the page that could make a browser fetch something."""
    problems = []
    for pattern in (r"<script[^>]*\bsrc\s*=", r"<link\b", r"<img\b", r"<iframe\b", r"\bsrc\s*=", r"@import",
                    r"url\(\s*['\"]?(?!#)", r"@font-face", r"<object\b", r"<embed\b", r"<meta[^>]*refresh"):
        for m in re.finditer(pattern, text, re.I):
            problems.append("page has %r at %d" % (m.group(0), m.start()))
    for m in re.finditer(r"https?://[^\s\"'<>]+", text):
        # The one web address a page may hold: the MLflow run's link, followed only when clicked.
        before = text[max(0, m.start() - 200):m.start()]
        if 'id="fact-mlflow"' not in before:
            problems.append("page names %s outside the MLflow link" % m.group(0))
    return problems


def main(argv):
    args = list(argv)
    shot = None
    if "--screenshot" in args:
        i = args.index("--screenshot")
        shot = args[i + 1]
        del args[i:i + 2]
    page, summary_files = args[0], args[1:]
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no chromium installed (apt-get install chromium; scripts/install-deps.sh --test)")
        return 77
    summaries = [json.load(open(f)) for f in summary_files]
    text = open(page, encoding="utf-8").read()
    failures = static_check(text)
    want = expected_from(summaries)
    listener = Listener()
    url = "file://" + os.path.abspath(page)
    shot = shot or os.path.join(tempfile.mkdtemp(prefix="air-shot-"), "page.png")
    try:
        # One browser: the DOM after loading, and the screenshot of it.
        dom = run_chromium(chromium, listener.port,
                           ["--window-size=1000,700", "--screenshot=" + shot, "--dump-dom", url])
    finally:
        listener.close()
    fetched = [c for c in listener.connections if not (c and BROWSER_OWN.match(c[0]))]
    if fetched:
        failures.append("the page made the browser connect out: %s" % fetched)
    counter = Counter()
    counter.feed(dom)
    got = {"ranks": counter.lane_ranks, "attempts": counter.attempts}
    got.update({k: counter.kinds.get(k, 0) for k in ("first-step", "quiet", "start", "hang", "preemption",
                                                       "straggler")})
    lanes_per_rank = counter.lanes == want["ranks"]
    if want["ranks"] > 64:
        # Grouped: fewer lanes than ranks, every rank in one, markers for the lanes drawn.
        for k in ("first-step", "quiet", "start"):
            got.pop(k), want.pop(k)
        if counter.lanes >= want["ranks"] or counter.lanes == 0:
            failures.append("%d ranks drawn as %d lanes" % (want["ranks"], counter.lanes))
    elif not lanes_per_rank:
        failures.append("%d lanes for %d ranks" % (counter.lanes, want["ranks"]))
    if counter.kinds.get("exit", 0) < counter.lanes:
        failures.append("%d exit markers for %d lanes" % (counter.kinds.get("exit", 0), counter.lanes))
    for key, value in want.items():
        if got.get(key) != value:
            failures.append("%s: the summary has %s, the page shows %s" % (key, value, got.get(key)))
    if not os.path.exists(shot):
        failures.append("no screenshot")
    else:
        width, height, colours, non_white = png_pixels(shot)
        sampled = (width // 4) * height
        if non_white < sampled * 0.03 or len(colours) < 8:
            failures.append("the screenshot looks blank: %d of %d sampled pixels not white, %d colours"
                            % (non_white, sampled, len(colours)))
        print("screenshot %s: %dx%d, %d%% of sampled pixels not white, %d colours"
              % (shot, width, height, 100 * non_white // max(1, sampled), len(colours)))
    print("page %s: %d bytes, %d lanes, %s" % (page, len(text.encode()), counter.lanes,
                                             ", ".join("%s %s" % kv for kv in sorted(got.items()))))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
