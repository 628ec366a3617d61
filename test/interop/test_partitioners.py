"""Item 7 of the interop suite: the three partitioners give TensorFlow's
shard counts over a grid of shapes, dtypes and arguments, and get_variable
splits a variable into parts of TensorFlow's shapes (uneven splits
included). Invalid arguments raise the same error class."""
import itertools

import pytest

from conftest import tf, tf1, tool

SHAPES = [[10, 3], [7], [1000, 100], [3, 1024], [1, 5], [64, 64, 4]]
DTYPES = [tf.float32, tf.float16, tf.int64, tf.string]


def cases():
    """(id, dtype, shape, kind, args) over the grid; args as the tool reads
    them, '-' for None."""
    out = []
    for shape, dtype in itertools.product(SHAPES, DTYPES):
        # TensorFlow checks the axis against the rank only in
        # min_max_variable_partitioner (the others raise IndexError).
        for axis in range(len(shape)):
            for shards in [1, 2, 3, 4, 7, 16]:
                out.append((dtype, shape, "fixed", [shards, axis]))
            for max_bytes, max_shards in itertools.product([0, 1, 100, 4096], [None, 2, 3]):
                out.append((dtype, shape, "axis_size", [max_bytes, axis, 16, max_shards]))
            out.append((dtype, shape, "axis_size", [100, axis, 4, None]))
        for axis in range(len(shape) + 1):
            for parts, min_slice in itertools.product([1, 3, 8, 100], [1, 64, 1024]):
                out.append((dtype, shape, "min_max", [parts, axis, min_slice, 16]))
            out.append((dtype, shape, "min_max", [8, axis, 64, 2]))
    return [(f"c{i}", *c) for i, c in enumerate(out)]


def tf_partitioner(kind, args):
    if kind == "fixed":
        return tf1.fixed_size_partitioner(num_shards=args[0], axis=args[1])
    if kind == "axis_size":
        return tf1.variable_axis_size_partitioner(
            max_shard_bytes=args[0], axis=args[1], bytes_per_string_element=args[2],
            max_shards=args[3])
    return tf1.min_max_variable_partitioner(
        max_partitions=args[0], axis=args[1], min_slice_size=args[2],
        bytes_per_string_element=args[3])


def tf_result(dtype, shape, kind, args):
    """The tool's output line fields (after the id) for TensorFlow."""
    try:
        partitioner = tf_partitioner(kind, args)
        parts = partitioner(shape=tf.TensorShape(shape), dtype=dtype)
    except (ValueError, TypeError) as e:
        return ["error", type(e).__name__]
    text = ",".join(str(int(p)) for p in parts)
    if dtype == tf.string:
        return [text, "-"]
    with tf1.Graph().as_default():
        v = tf1.get_variable("v", shape=shape, dtype=dtype, initializer=tf1.zeros_initializer(),
                             partitioner=tf_partitioner(kind, args))
        variables = list(v) if hasattr(v, "_get_variable_list") else [v]
        shapes = ";".join("x".join(str(d) for d in p.shape.as_list()) for p in variables)
    return [text, shapes]


def test_partitioners_equal_tensorflow(tmp_path):
    grid = cases()
    with open(tmp_path / "spec.txt", "w", encoding="ascii") as f:
        for cid, dtype, shape, kind, args in grid:
            fields = ["-" if a is None else str(a) for a in args]
            dims = ",".join(map(str, shape)) or "-"
            f.write(f"{cid} {dtype.as_datatype_enum} {dims} {kind} {' '.join(fields)}\n")
    tool("partition", tmp_path / "spec.txt", tmp_path / "out.txt")
    got = {}
    for line in open(tmp_path / "out.txt", encoding="ascii"):
        f = line.split()
        got[bytes.fromhex(f[0]).decode()] = f[1:]
    assert len(got) == len(grid)
    mismatches = []
    for cid, dtype, shape, kind, args in grid:
        want = tf_result(dtype, shape, kind, args)
        if got[cid] != want:
            mismatches.append(f"{kind}{args} {dtype.name}{shape}: varstate {got[cid]}, TF {want}")
    assert not mismatches, f"{len(mismatches)} of {len(grid)} differ:\n" + "\n".join(mismatches[:20])


@pytest.mark.parametrize("shape", [[10, 3], [11, 2]])
def test_uneven_parts_take_the_extra_rows_first(tmp_path, shape):
    """fixed_size_partitioner(3) on dimension 10 or 11: TF's part sizes."""
    with open(tmp_path / "spec.txt", "w", encoding="ascii") as f:
        f.write(f"u {tf.float32.as_datatype_enum} {','.join(map(str, shape))} fixed 3 0\n")
    tool("partition", tmp_path / "spec.txt", tmp_path / "out.txt")
    got = open(tmp_path / "out.txt", encoding="ascii").read().split()[1:]
    assert got == tf_result(tf.float32, shape, "fixed", [3, 0])
