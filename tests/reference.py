#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""Plain reference blkhash, independent of the project's C code.

    reference.py [--blocks] DIGEST BLOCK_SIZE FILE

digest = H(H(b1) || ... || H(bn) || le64(size)), blocks of BLOCK_SIZE
bytes (any size, a power of two or not), the last one at its real
length.  Prints the hex digest, or with --blocks the block digests
H(b1) || ... || H(bn) in hex.  The extendable-output shake128 and
shake256 are cut at 16 and 32 bytes, as blksum has them.  blake3
(32 bytes) comes from the python3-blake3 module, the official
implementation's bindings, where the system has it.
"""
import hashlib
import struct
import sys

# OpenSSL names that hashlib spells differently.
NAMES = {"blake2b512": "blake2b", "blake2s256": "blake2s",
         "sha3-224": "sha3_224", "sha3-256": "sha3_256",
         "sha3-384": "sha3_384", "sha3-512": "sha3_512",
         "sha512-256": "sha512_256", "sha512-224": "sha512_224",
         "shake-128": "shake128", "shake-256": "shake256"}

# Extendable-output digests: hashlib's class and the output length.
XOF = {"shake128": (hashlib.shake_128, 16),
       "shake256": (hashlib.shake_256, 32)}


class Shake:
    """A shake hash with a fixed output length, like the others."""

    def __init__(self, cls, length):
        self.h = cls()
        self.length = length

    def update(self, data):
        self.h.update(data)

    def digest(self):
        return self.h.digest(self.length)

    def hexdigest(self):
        return self.h.hexdigest(self.length)


def new(name):
    name = NAMES.get(name.lower(), name.lower())
    if name == "blake3":
        try:
            import blake3
        except ImportError:
            sys.exit("reference.py: blake3 needs the python3-blake3 module")
        return blake3.blake3()
    if name in XOF:
        return Shake(*XOF[name])
    return hashlib.new(name)


def blkhash(name, block_size, f, blocks=False):
    outer = new(name)
    zero_block = bytes(block_size)
    zero_digest = None
    digests = []
    size = 0
    while True:
        block = f.read(block_size)
        if not block:
            break
        size += len(block)
        if block == zero_block:
            if zero_digest is None:
                zero_digest = new(name)
                zero_digest.update(zero_block)
                zero_digest = zero_digest.digest()
            d = zero_digest
        else:
            h = new(name)
            h.update(block)
            d = h.digest()
        outer.update(d)
        if blocks:
            digests.append(d)
    if blocks:
        return "".join(d.hex() for d in digests)
    outer.update(struct.pack("<Q", size))
    return outer.hexdigest()


def main():
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    blocks = args[:1] == ["--blocks"]
    if blocks:
        args = args[1:]
    if len(args) != 3 or not args[1].isdigit() or int(args[1]) == 0:
        sys.exit("usage: reference.py [--blocks] DIGEST BLOCK_SIZE FILE")
    name, block_size, path = args[0], int(args[1]), args[2]
    if path == "-":
        print(blkhash(name, block_size, sys.stdin.buffer, blocks))
    else:
        with open(path, "rb", buffering=0) as f:
            print(blkhash(name, block_size, f, blocks))


if __name__ == "__main__":
    main()
