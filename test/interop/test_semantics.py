"""Item 6 of the interop suite: semantics the reference docs state, checked
against TensorFlow running them: use_locking defaults, strided slices and
slice assigns (extreme steps, ellipsis and newaxis included), integer
division on negatives, and the error class of each documented error case."""
import numpy as np
import pytest

from conftest import encode, read_tensors, same_bits, tf, tf1, tool, write_tensors


def test_use_locking_defaults(tmp_path):
    """The op attr TF's functions create equals whether varstate's call with
    default arguments takes the variable's update lock."""
    tool("locking", tmp_path / "locking.txt")
    got = dict(line.split() for line in open(tmp_path / "locking.txt"))
    with tf1.Graph().as_default():
        v = tf1.Variable([1.0, 2.0, 3.0, 4.0], name="v")
        ones = tf.ones([4])
        ops = {
            "assign": tf1.assign(v, ones),
            "assign_add": tf1.assign_add(v, ones),
            "assign_sub": tf1.assign_sub(v, ones),
            "method_assign": v.assign(ones),
            "method_assign_add": v.assign_add(ones),
            "method_assign_sub": v.assign_sub(ones),
        }
        for name in ["update", "add", "sub", "mul", "div", "min", "max"]:
            ops[f"scatter_{name}"] = getattr(tf1, f"scatter_{name}")(v, [0, 2], [2.0, 2.0])
        want = {k: str(int(op.op.get_attr("use_locking"))) for k, op in ops.items()}
    assert got == want


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
SLICE_CASES = [
    ([10], f"::{INT64_MIN}"), ([10], f"::{INT64_MAX}"), ([10], f"0:10:{INT64_MAX}"),
    ([10], f"{INT64_MAX}::-1"), ([10], f"{INT64_MIN}:{INT64_MAX}"),
    ([10], f"-1:{INT64_MIN}:{INT64_MIN}"), ([10], f"9:0:{INT64_MIN}"),
    ([10], "::-1"), ([10], "::3"), ([10], "-3:"), ([10], "2:-2:2"), ([10], "8:1:-3"),
    ([10], "-100:100"), ([10], "100:-100:-1"), ([10], "5:5"), ([10], "-1"), ([10], "0"),
    ([4, 6], "1:3,::-2"), ([4, 6], "-1,1:5:3"), ([4, 6], f"::{INT64_MAX},::{INT64_MIN}"),
    ([0], "::-1"), ([3, 0, 2], "1,:,::-1"),
    # Ellipsis ("...") and tf.newaxis ("new").
    ([2, 3, 4], "...,1"), ([2, 3, 4], "1,...,::2"), ([2, 3, 4], ":,new"),
    ([2, 3, 4], "...,new"), ([2, 3, 4], "new,...,0,new"), ([2, 3, 4], "..."),
    ([2, 3, 4], "0,1,2,..."), ([2, 3, 4], "...,::-1,0"), ([2, 3, 4], "new"),
    ([2, 3, 4], "1,new,-1"), ([2, 3, 4], "new,new,...,1:,new"), ([5], "...,new,3:0:-2"),
    # ValueError on both sides. (Too many indices and an index out of range
    # are InvalidArgumentError in varstate, as in TF's kernel, while TF's
    # graph builder raises ValueError for static shapes; not compared.)
    ([2, 3, 4], "...,..."),
]


def tf_slice_spec(text):
    out = []
    for dim in text.split(","):
        p = dim.split(":")
        if dim in ("...", "new"):
            out.append(Ellipsis if dim == "..." else tf.newaxis)
        elif len(p) == 1:
            out.append(int(p[0]))
        else:
            vals = [int(x) if x else None for x in p] + [None] * (3 - len(p))
            out.append(slice(*vals))
    return tuple(out)


def write_slice_cases(path):
    with open(path, "w") as f:
        for i, (dims, spec) in enumerate(SLICE_CASES):
            f.write(f"s{i} {','.join(map(str, dims))} {spec}\n")


def tf_outcome(sess, fn):
    """sess.run(fn()) or, when TensorFlow raises, ("error", class name) as
    read_tensors gives varstate's errors."""
    try:
        return sess.run(fn())
    except (tf.errors.OpError, ValueError, TypeError) as e:
        return ("error", type(e).__name__)


def same_outcome(got, want):
    if isinstance(want, tuple) or isinstance(got, tuple):
        return got == want
    return same_bits(got, want)


def test_strided_slices_equal_tensorflow(tmp_path):
    write_slice_cases(tmp_path / "slices.txt")
    tool("slice", tmp_path / "slices.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    with tf1.Graph().as_default(), tf1.Session() as sess:
        for i, (dims, spec) in enumerate(SLICE_CASES):
            t = tf.reshape(tf.range(int(np.prod(dims)), dtype=tf.int64), dims)
            want = tf_outcome(sess, lambda: t[tf_slice_spec(spec)])
            assert same_outcome(got[f"s{i}"], want), (dims, spec, got[f"s{i}"], want)


def test_slice_assigns_equal_tensorflow(tmp_path):
    """v[spec].assign(-(1 + iota(shape of v[spec]))) on v = iota(dims): the
    value carries the newaxis dimensions, as TensorFlow requires."""
    write_slice_cases(tmp_path / "slices.txt")
    tool("slice_assign", tmp_path / "slices.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    for i, (dims, spec) in enumerate(SLICE_CASES):
        with tf1.Graph().as_default(), tf1.Session() as sess:
            v = tf1.Variable(np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims), name="v")

            def assign():
                region = v[tf_slice_spec(spec)]
                shape = region.shape.as_list()
                value = -(1 + np.arange(int(np.prod(shape)), dtype=np.int64)).reshape(shape)
                with tf.control_dependencies([region.assign(value)]):
                    return v.read_value()

            sess.run(tf1.global_variables_initializer())
            want = tf_outcome(sess, assign)
            assert same_outcome(got[f"s{i}"], want), (dims, spec, got[f"s{i}"], want)


def test_integer_division_on_negatives(tmp_path):
    x32 = np.array([-7, 7, -7, 7, -1, 0, -2147483647, 2147483647, -6, 5], np.int32)
    y32 = np.array([2, -2, -2, 2, 3, -5, 2, -3, 3, -7], np.int32)
    lines, cases = [], []
    for dt, np_dt in [("int32", np.int32), ("int64", np.int64), ("int8", np.int8),
                      ("int16", np.int16)]:
        x, y = x32.astype(np_dt), y32.astype(np_dt)
        if dt in ("int8", "int16"):
            x, y = (x32 % 100).astype(np_dt) * np.sign(x32).astype(np_dt), y
        for op in ["floordiv", "floormod", "div"]:
            key = f"{op}_{dt}"
            lines += [encode(key, x) + f" {op}", encode("y", y)]
            cases.append((key, op, x, y))
    write_tensors(tmp_path / "math.txt", lines)
    tool("math", tmp_path / "math.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    with tf1.Graph().as_default(), tf1.Session() as sess:
        for key, op, x, y in cases:
            fn = {"floordiv": tf.math.floordiv, "floormod": tf.math.floormod,
                  "div": tf.math.truediv}[op]
            want = sess.run(fn(tf.constant(x), tf.constant(y)))
            assert same_bits(got[key], want), (key, got[key], want)


def test_integer_floor_division_as_tensorflow(tmp_path):
    """floordiv and floormod by one divisor (a scalar: 64-bit hashes into
    buckets, the CPU's multiply-by-reciprocal path) and element by element
    (types of up to 32 bits: the CPU's double-division path) against
    TensorFlow's kernels: every pair of int8 and uint8 values (but the
    overflowing -128 // -1), random int32 and int64 values of both signs."""
    rng = np.random.default_rng(9)
    hashes = rng.integers(-2**63, 2**63 - 1, size=20000, dtype=np.int64)
    x32 = rng.integers(-2**31, 2**31 - 1, size=20000, dtype=np.int64).astype(np.int32)
    y32 = (rng.integers(-2**31, 2**31 - 1, size=20000, dtype=np.int64) >>
           rng.integers(0, 31, size=20000)).astype(np.int32)
    y32[y32 == 0] = 3
    x32[(x32 == -2**31) & (y32 == -1)] = 5
    i8 = np.arange(-128, 128, dtype=np.int64)
    x8, y8 = np.meshgrid(i8, i8[i8 != 0])
    keep = ~((x8 == -128) & (y8 == -1))
    x8, y8 = x8[keep].astype(np.int8), y8[keep].astype(np.int8)
    u8 = np.arange(256, dtype=np.int64)
    xu8, yu8 = np.meshgrid(u8, u8[1:])
    xu8, yu8 = xu8.ravel().astype(np.uint8), yu8.ravel().astype(np.uint8)
    operands = [("hash_buckets", hashes, np.array(1000003, np.int64)),
                ("hash_neg", hashes, np.array(-64, np.int64)),
                ("hash_pow2", hashes, np.array(1 << 20, np.int64)),
                ("i32_scalar", x32, np.array(-97, np.int32)),
                ("i32_pairs", x32, y32),
                ("i8_pairs", x8, y8),
                ("u8_pairs", xu8, yu8)]
    lines, cases = [], []
    for name, x, y in operands:
        for op in ["floordiv", "floormod"]:
            key = f"{op}_{name}"
            lines += [encode(key, x) + f" {op}", encode("y", y)]
            cases.append((key, op, x, y))
    write_tensors(tmp_path / "math.txt", lines)
    tool("math", tmp_path / "math.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    with tf1.Graph().as_default(), tf1.Session() as sess:
        for key, op, x, y in cases:
            fn = {"floordiv": tf.math.floordiv, "floormod": tf.math.floormod}[op]
            want = sess.run(fn(tf.constant(x), tf.constant(y)))
            assert same_bits(got[key], want), (key, got[key], want)


def test_matmul_sums_as_tensorflow(tmp_path):
    """matmul of normal values in float32, float64, bfloat16 and float16
    against TensorFlow's CPU kernel: both sum in float (double for float64)
    and round a 16-bit result once, so they differ by the two sums' rounding
    errors (summed in another order) and at most one unit in the last place
    of the 16-bit result."""
    rng = np.random.default_rng(5)
    m, k, n = 37, 300, 45
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    dtypes = {"float32": tf.float32, "float64": tf.float64, "bfloat16": tf.bfloat16,
              "float16": tf.float16}
    lines, operands = [], {}
    for name, dt in dtypes.items():
        x = a.astype(dt.as_numpy_dtype)
        y = b.astype(dt.as_numpy_dtype)
        operands[name] = (x, y)
        lines += [encode(name, x) + " matmul", encode("y", y)]
    write_tensors(tmp_path / "matmul.txt", lines)
    tool("math", tmp_path / "matmul.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    with tf1.Graph().as_default(), tf1.Session() as sess:
        for name, dt in dtypes.items():
            x, y = operands[name]
            want = sess.run(tf.linalg.matmul(tf.constant(x), tf.constant(y)))
            assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
            ours = got[name].astype(np.float64)
            theirs = want.astype(np.float64)
            magnitude = np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64))
            u = 2.0 ** -53 if name == "float64" else 2.0 ** -24
            allowed = 2 * (k + 2) * u * magnitude
            if name in ("bfloat16", "float16"):
                # one unit in the last place of the 16-bit type at the result
                digits = 8 if name == "bfloat16" else 11
                allowed = allowed + np.exp2(np.floor(np.log2(np.maximum(np.abs(theirs), 2.0 ** -14)))
                                            - digits + 1)
            worst = np.max(np.abs(ours - theirs) - allowed)
            assert worst <= 0, (name, worst)


def tf_error_cases(tmp):
    """Case name -> a function running it in TF graph mode (same names as
    interop_tool's `errors` command). Not compared: glorot_*_initializer(
    dtype=int32), which TF 2.x accepts by ignoring the deprecated constructor
    dtype, while the TF 1.x reference docs (and varstate) raise ValueError."""
    def var():
        return tf1.Variable([1.0, 2.0, 3.0], name="v")

    def run(fn, init=True):
        with tf1.Graph().as_default():
            tensor = fn()
            with tf1.Session() as sess:
                if init:
                    sess.run(tf1.global_variables_initializer())
                sess.run(tensor)

    ckpt = f"{tmp}/ckpt"
    with tf1.Graph().as_default():
        var()
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, ckpt, write_meta_graph=False)

    def restore_into(value, name, path):
        with tf1.Graph().as_default():
            tf1.Variable(value, name=name)
            saver = tf1.train.Saver()
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                saver.restore(sess, path)

    def save_missing_directory():
        with tf1.Graph().as_default():
            tf1.Variable([1.0], name="v")
            saver = tf1.train.Saver()
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                saver.save(sess, f"{tmp}/no/such/dir/model")

    def count_up_to():
        with tf1.Graph().as_default():
            c = tf1.Variable(np.int64(3), name="c")
            op = tf1.count_up_to(c, 3)
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                sess.run(op)

    return {
        "read_uninitialized": lambda: run(lambda: var().value(), init=False),
        "assign_add_uninitialized": lambda: run(lambda: tf1.assign_add(var(), [1.0, 1.0, 1.0]),
                                         init=False),
        "scatter_update_out_of_range":
            lambda: run(lambda: tf1.scatter_update(var(), [5], [1.0])),
        "scatter_add_negative_index": lambda: run(lambda: tf1.scatter_add(var(), [-1], [1.0])),
        "count_up_to_limit": count_up_to,
        # Shape mismatches: a varstate call's shapes are all known, as TF's
        # static shapes, for which TF's graph builder raises ValueError
        # (its kernels raise InvalidArgumentError only for shapes known at
        # run time). assign_add/assign_sub of a scalar are left out: varstate
        # broadcasts it, TF rejects it (docs/tensorflow-compatibility.md).
        "assign_shape_mismatch": lambda: run(lambda: tf1.assign(var(), [1.0, 2.0])),
        "assign_add_shape_mismatch": lambda: run(lambda: tf1.assign_add(var(), [1.0, 2.0])),
        "assign_sub_shape_mismatch":
            lambda: run(lambda: tf1.assign_sub(var(), [[1.0, 2.0, 3.0]])),
        "assign_scalar_broadcast": lambda: run(lambda: tf1.assign(var(), 5.0)),
        "add_incompatible_shapes":
            lambda: run(lambda: tf.constant([1.0, 2.0, 3.0]) + tf.constant([1.0, 2.0])),
        "multiply_incompatible_shapes":
            lambda: run(lambda: tf.zeros([2, 3]) * tf.zeros([2, 2])),
        "matmul_inner_dimension_mismatch":
            lambda: run(lambda: tf.matmul(tf.zeros([2, 3]), tf.zeros([2, 3]))),
        "matmul_not_a_matrix": lambda: run(lambda: tf.matmul(tf.zeros([3]), tf.zeros([3, 2]))),
        "scatter_update_updates_shape":
            lambda: run(lambda: tf1.scatter_update(var(), np.array([0, 1], np.int64), [1.0])),
        "scatter_add_updates_rank":
            lambda: run(lambda: tf1.scatter_add(var(), np.array([0, 1], np.int64), [[1.0, 2.0]])),
        "scatter_max_into_scalar":
            lambda: run(lambda: tf1.scatter_max(tf1.Variable(1.0, name="s"),
                                                np.array([0], np.int64), [1.0])),
        "variable_initial_value_other_dtype":
            lambda: run(lambda: tf1.Variable(tf.constant([1, 2], tf.int32), name="w",
                                             dtype=tf.float32).value()),
        "random_uniform_int_without_maxval":
            lambda: run(lambda: tf1.random_uniform([3], dtype=tf.int32)),
        "random_uniform_int_empty_range":
            lambda: run(lambda: tf1.random_uniform([3], minval=5, maxval=3, dtype=tf.int32)),
        "random_normal_int_dtype": lambda: run(lambda: tf1.random_normal([3], dtype=tf.int32)),
        "truncated_normal_int_dtype":
            lambda: run(lambda: tf1.truncated_normal([3], dtype=tf.int64)),
        "random_uniform_int8_dtype":
            lambda: run(lambda: tf1.random_uniform([3], maxval=3, dtype=tf.int8)),
        "random_normal_initializer_int_dtype":
            lambda: tf1.random_normal_initializer(dtype=tf.int32),
        "random_uniform_initializer_int_without_maxval":
            lambda: tf1.random_uniform_initializer(dtype=tf.int32)([3]),
        "floordiv_int_by_zero":
            lambda: run(lambda: tf.math.floordiv(tf.constant([7, -7]), tf.constant([0, 1]))),
        "floormod_int_by_zero":
            lambda: run(lambda: tf.math.floormod(tf.constant([7, -7]), tf.constant([2, 0]))),
        "slice_step_zero": lambda: run(lambda: tf.constant([1, 2, 3])[0:3:0]),
        "slice_multiple_ellipses": lambda: run(lambda: tf.constant([[1, 2], [3, 4]])[..., ...]),
        "constant_initializer_too_many":
            lambda: run(lambda: tf1.constant_initializer([1.0, 2.0, 3.0])([2])),
        "variance_scaling_bad_scale": lambda: tf1.variance_scaling_initializer(scale=-1.0),
        "variance_scaling_bad_mode": lambda: tf1.variance_scaling_initializer(mode="fan_sum"),
        "restore_missing_key": lambda: restore_into([1.0, 2.0, 3.0], "missing", ckpt),
        "restore_dtype_mismatch": lambda: restore_into([1, 2, 3], "v", ckpt),
        "restore_shape_mismatch": lambda: restore_into([1.0, 2.0], "v", ckpt),
        "restore_no_checkpoint": lambda: restore_into([1.0, 2.0, 3.0], "v", f"{tmp}/none"),
        "save_missing_directory": save_missing_directory,
    }


def test_error_classes_equal_tensorflow(tmp_path):
    (tmp_path / "vs").mkdir()
    (tmp_path / "tf").mkdir()
    tool("errors", tmp_path / "errors.txt", tmp_path / "vs")
    got = dict(line.split() for line in open(tmp_path / "errors.txt"))
    cases = tf_error_cases(tmp_path / "tf")
    assert set(got) == set(cases)
    for name, fn in cases.items():
        try:
            fn()
            want = "none"
        except (tf.errors.OpError, ValueError, TypeError) as e:
            want = type(e).__name__
        assert got[name] == want, (name, got[name], want)
