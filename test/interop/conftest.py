"""Shared helpers of the TensorFlow interop suite.

varstate's side runs as the interop_tool program (path in
VARSTATE_INTEROP_TOOL); tensors travel between it and TensorFlow in the text
form of tensor_text.h. TensorFlow runs in graph mode (tf.compat.v1), the TF 1.x
API of the reference docs. A new comparison (e.g. partitioners) needs only a
tool command plus a test using `tool`, `write_tensors` and `read_tensors`.
"""
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_resource_variables()  # VariableV2 ref variables, as varstate's

TOOL = os.environ.get("VARSTATE_INTEROP_TOOL", "")


def np_dtype(enum):
    return tf.as_dtype(enum).as_numpy_dtype


def encode(key, array, enum=None):
    """One text line for `array` (numpy) of TF dtype `enum`."""
    enum = tf.as_dtype(array.dtype).as_datatype_enum if enum is None else enum
    array = np.asarray(array)
    head = key.encode("utf-8").hex() or "-"
    dims = ",".join(str(d) for d in array.shape) or "-"
    if enum == tf.string.as_datatype_enum:
        data = ",".join(bytes(e).hex() for e in array.reshape(-1))
    else:
        data = np.ascontiguousarray(array).tobytes().hex()
    return f"{head} {enum} {dims} {data or '-'}"


def decode(line):
    """(key, numpy array, dtype enum, extra fields) of one text line."""
    f = line.split(" ")
    key = bytes.fromhex("" if f[0] == "-" else f[0]).decode("utf-8")
    if f[1] == "error":
        return key, None, f[2], []
    enum = int(f[1])
    dims = [] if f[2] == "-" else [int(d) for d in f[2].split(",")]
    data = "" if f[3] == "-" else f[3]
    n = int(np.prod(dims)) if dims else 1
    if enum == tf.string.as_datatype_enum:
        items = [bytes.fromhex(e) for e in data.split(",")] if n else []
        arr = np.array(items, dtype=object).reshape(dims)
    else:
        arr = np.frombuffer(bytes.fromhex(data), dtype=np_dtype(enum)).reshape(dims)
    return key, arr, enum, f[4:]


def write_tensors(path, lines):
    with open(path, "w", encoding="ascii") as out:
        out.write("".join(line + "\n" for line in lines))


def read_tensors(path):
    """key -> numpy array (or the error class name) in file order."""
    out = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            key, arr, enum, _ = decode(line.rstrip("\n"))
            out[key] = arr if arr is not None else ("error", enum)
    return out


def tool(*args, expect_ok=True):
    """Runs interop_tool; returns the CompletedProcess."""
    assert TOOL, "VARSTATE_INTEROP_TOOL is not set (run through ctest)"
    proc = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, check=False)
    if expect_ok and proc.returncode != 0:
        pytest.fail(f"interop_tool {' '.join(map(str, args))} failed: {proc.stderr.strip()}")
    return proc


def same_bits(a, b):
    """Exact equality, NaNs and signed zeros included (strings by value)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == object or b.dtype == object:
        return [bytes(x) for x in a.reshape(-1)] == [bytes(x) for x in b.reshape(-1)]
    return a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


@pytest.fixture
def graph():
    """A fresh TF graph as default, with a session."""
    g = tf1.Graph()
    with g.as_default():
        yield g
