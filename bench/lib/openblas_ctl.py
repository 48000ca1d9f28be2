"""The OpenBLAS that PyTorch's CPU build calls, seen through ctypes: its
kernel name (what the result lines print beside cdp's banner) and its thread
count (set per contestant, since torch.set_num_threads does not reach it)."""
import ctypes


def openblas():
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib
        except (OSError, AttributeError):
            continue
    return None


def corename():
    lib = openblas()
    return lib.openblas_get_corename().decode() if lib else "unknown"


def set_blas_threads(n):
    lib = openblas()
    if lib:
        lib.openblas_set_num_threads(int(n))
