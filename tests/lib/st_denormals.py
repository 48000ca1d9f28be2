"""Counts the denormal floats (0 < |x| < 2^-126) of one F32 tensor of a
safetensors file (a cdp checkpoint or weights file); standard library only.

usage: st_denormals.py FILE TENSOR   prints the count; exit 2 on a bad file
"""
import array
import json
import struct
import sys

FLT_MIN = 1.1754943508222875e-38


def main(path, name):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    t = header.get(name)
    if not t or t.get("dtype") != "F32":
        raise ValueError(f"no F32 tensor {name}")
    lo, hi = t["data_offsets"]
    values = array.array("f")
    values.frombytes(blob[8 + n + lo:8 + n + hi])
    if sys.byteorder != "little":
        values.byteswap()
    print(sum(1 for x in values if x != 0.0 and abs(x) < FLT_MIN))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        main(sys.argv[1], sys.argv[2])
    except (OSError, ValueError, KeyError, struct.error) as e:
        print(f"st_denormals.py: {sys.argv[1]}: {e}", file=sys.stderr)
        sys.exit(2)
