"""Which files a rank and a DataLoader worker read in an epoch (pure functions).

Every rank computes the same epoch order from (file count, seed, epoch), takes
its slice of it, and splits what is left of that slice among its DataLoader
workers. Positions are indices into the rank's slice, so a padded slice (which
repeats files) still tracks each read separately.
"""

import base64
import hashlib
import random
import zlib

# How a rank's slice is cut when the file count is not a multiple of the world size.
UNEVEN_MODES = {
    "exact": "every file once per epoch; ranks differ by at most one file",
    "drop_last": "the last (count % world_size) files of the epoch order are skipped",
    "pad": "the slice is padded with files from the start of the epoch order",
}


def epoch_order(count, shuffle, seed, epoch):
    """File indices in the order of this epoch: 0..count-1, or a permutation
    that depends only on (seed, epoch), the same in every process."""
    order = list(range(count))
    if shuffle:
        digest = hashlib.sha256(b"air.data/%d/%d" % (seed, epoch)).digest()
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def rank_slice(order, rank, world_size, uneven="exact"):
    """The file indices of one rank, every world_size-th file of the order."""
    if uneven not in UNEVEN_MODES:
        raise ValueError("uneven must be one of %s, not %r" % (", ".join(UNEVEN_MODES), uneven))
    count = len(order)
    if uneven == "drop_last":
        order = order[:count - count % world_size]
    elif uneven == "pad" and count % world_size:
        total = -(-count // world_size) * world_size
        repeats = -(-total // count)
        order = (order * repeats)[:total]
    return order[rank::world_size]


def worker_positions(remaining, worker, num_workers):
    """A DataLoader worker's share of the rank's remaining positions. Read
    round-robin, as DataLoader does, the shares give back `remaining` in order."""
    return remaining[worker::num_workers]


def fingerprint(entries):
    """A short hash of the file list (names and sizes): a resumed state must
    describe the same files."""
    digest = hashlib.sha256()
    for name, size in entries:
        digest.update(b"%s\0%d\0" % (name.encode("utf-8", "surrogateescape"), size))
    return digest.hexdigest()[:16]


class Progress:
    """Which positions of a rank's slice have been handed to the consumer."""

    def __init__(self, length):
        self.length = length
        self._bits = bytearray((length + 7) // 8)
        self.count = 0

    def mark(self, position):
        byte, bit = divmod(position, 8)
        if not self._bits[byte] & (1 << bit):
            self._bits[byte] |= 1 << bit
            self.count += 1

    def done(self, position):
        byte, bit = divmod(position, 8)
        return bool(self._bits[byte] & (1 << bit))

    def complete(self):
        return self.count == self.length

    def remaining(self):
        return [p for p in range(self.length) if not self.done(p)]

    def encode(self):
        """Compressed, base64 text: fits JSON as well as torch.save and DCP."""
        return base64.b64encode(zlib.compress(bytes(self._bits))).decode("ascii")

    @classmethod
    def decode(cls, text, length):
        bits = zlib.decompress(base64.b64decode(text.encode("ascii")))
        if len(bits) != (length + 7) // 8:
            raise ValueError("the consumed-files record does not match a slice of %d files"
                             % length)
        progress = cls(length)
        progress._bits = bytearray(bits)
        progress.count = sum(1 for p in range(length) if progress.done(p))
        return progress
