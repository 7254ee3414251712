"""Extract the uncompressed ELF vmlinux from an x86 bzImage (xz, gzip or zstd
payload), like the kernel tree's scripts/extract-vmlinux. qemu boots the ELF
through PVH, which skips the BIOS and the in-kernel decompressor.

usage: extract_vmlinux.py BZIMAGE OUT
"""
import gzip
import lzma
import shutil
import subprocess
import sys
import zlib

ELF = b"\x7fELF"


def candidates(data):
    """Yield (name, decompress function, offset) for each payload magic."""
    magics = [
        ("xz", b"\xfd7zXZ\x00", lambda b: lzma.LZMADecompressor().decompress(b)),
        ("gzip", b"\x1f\x8b\x08", lambda b: zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(b)),
        ("zstd", b"\x28\xb5\x2f\xfd", zstd),
    ]
    for name, magic, fn in magics:
        off = data.find(magic)
        while off >= 0:
            yield name, fn, off
            off = data.find(magic, off + 1)


def zstd(b):
    if not shutil.which("zstd"):
        raise ValueError("zstd not installed")
    return subprocess.run(["zstd", "-qdc"], input=b, capture_output=True).stdout


def main():
    src, dst = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()
    for name, fn, off in candidates(data):
        try:
            out = fn(data[off:])
        except (lzma.LZMAError, zlib.error, gzip.BadGzipFile, ValueError, EOFError):
            continue
        if out.startswith(ELF):
            with open(dst, "wb") as f:
                f.write(out)
            print(f"extract_vmlinux: {name} payload at {off}: {len(out)} bytes")
            return 0
    print(f"extract_vmlinux: no ELF payload found in {src}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
