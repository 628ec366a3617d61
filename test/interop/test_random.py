"""Items 4 and 5 of the interop suite: random values and seed rules.

For the same (graph seed, op seed), varstate's random ops and initializers
equal TensorFlow's CPU kernels bit for bit where TensorFlow's arithmetic is
exact (uniform: integer and float bit manipulation), and within a measured
number of units in the last place where it uses libm (log/sin/cos/sqrt in
Box-Muller). ULP_BOUND is the bound docs/tensorflow-compatibility.md states."""
import numpy as np
import pytest

from conftest import read_tensors, same_bits, tf, tf1, tool

# Largest difference measured against TF 2.21 CPU kernels, in ulps of the
# output dtype (normal and truncated normal; uniform values are exact).
ULP_BOUND = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 2}

SHAPE = [7, 33]  # 231 elements: several Philox groups and a partial one


def ulp_diff(a, b):
    """Per-element distance in representable values of a's dtype."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape

    def line(x):
        # sign-magnitude bits -> a monotonic integer line (as Python ints)
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
        sign = 1 << (8 * x.dtype.itemsize - 1)
        return [-(int(u) & (sign - 1)) if int(u) & sign else int(u)
                for u in x.view(bits).reshape(-1)]
    return np.array([abs(p - q) for p, q in zip(line(a), line(b))], dtype=object)


def tf_run(build, graph_seed):
    with tf1.Graph().as_default():
        if graph_seed is not None:
            tf1.set_random_seed(graph_seed)
        tensors = build()
        with tf1.Session() as sess:
            return sess.run(tensors)


def fmt(v):
    return "-" if v is None else str(v)


RANDOM_CASES = []
for dt in ["float16", "bfloat16", "float32", "float64"]:
    for gs, os_ in [(None, 1), (5, 1), (5, 10), (0, 0), (-3, 2**40), (123456789012, 7)]:
        RANDOM_CASES.append(("uniform", dt, gs, os_, None, None))
    RANDOM_CASES.append(("uniform", dt, 5, 3, -2.5, 4))
    for op in ["normal", "truncated"]:
        for gs, os_ in [(None, 1), (5, 1), (7, 99)]:
            RANDOM_CASES.append((op, dt, gs, os_, None, None))
        RANDOM_CASES.append((op, dt, 5, 3, 1.5, 0.25))
for dt in ["int32", "int64"]:
    RANDOM_CASES.append(("uniform", dt, 5, 10, 0, 3))
    RANDOM_CASES.append(("uniform", dt, None, 1, -1000, 1000))
    RANDOM_CASES.append(("uniform", dt, 5, 1, -(2**31), 2**31 - 1))
RANDOM_CASES.append(("uniform", "int64", 8, 2, -(2**62), 2**62))


def tf_random(op, dt, gs, os_, a, b):
    dtype = tf.as_dtype(dt)

    def build():
        if op == "uniform":
            kw = {}
            if a is not None:
                kw = {"minval": a, "maxval": b}
            return tf1.random_uniform(SHAPE, dtype=dtype, seed=os_, **kw)
        kw = {} if a is None else {"mean": a, "stddev": b}
        fn = tf1.random_normal if op == "normal" else tf1.truncated_normal
        return fn(SHAPE, dtype=dtype, seed=os_, **kw)
    return tf_run(build, gs)


@pytest.fixture(scope="module")
def varstate_random(tmp_path_factory):
    d = tmp_path_factory.mktemp("random")
    with open(d / "spec.txt", "w") as f:
        for i, (op, dt, gs, os_, a, b) in enumerate(RANDOM_CASES):
            f.write(f"c{i} {op} {dt} {','.join(map(str, SHAPE))} {fmt(gs)} {fmt(os_)} "
                    f"{fmt(a)} {fmt(b)}\n")
    tool("random", d / "spec.txt", d / "out.txt")
    return read_tensors(d / "out.txt")


@pytest.mark.parametrize("case", range(len(RANDOM_CASES)),
                         ids=["-".join(map(str, c)) for c in RANDOM_CASES])
def test_random_ops_equal_tensorflow(case, varstate_random):
    op, dt, gs, os_, a, b = RANDOM_CASES[case]
    want = tf_random(op, dt, gs, os_, a, b)
    got = varstate_random[f"c{case}"]
    assert got.dtype == want.dtype and got.shape == want.shape
    if op == "uniform" or dt.startswith("int"):
        assert same_bits(got, want)
    else:
        worst = int(ulp_diff(got, want).max()) if got.size else 0
        assert worst <= ULP_BOUND[dt], f"{worst} ulps"


INIT_CASES = [
    ("random_uniform", "float32", 5, 3, ["-1.5", "2.5"]),
    ("random_uniform", "float64", None, 4, []),
    ("random_uniform", "int32", 5, 3, ["-7", "9"]),
    ("random_uniform", "int64", 5, 3, ["0", "100000000000"]),
    ("random_normal", "float32", 5, 3, ["0.5", "2.0"]),
    ("random_normal", "float64", 5, 3, []),
    ("truncated_normal", "float32", 1, 2, ["0", "0.1"]),
    ("truncated_normal", "float64", 1, 2, []),
    ("uniform_unit_scaling", "float32", 5, 3, ["1.43"]),
    ("variance_scaling", "float32", 5, 3, ["2.0", "fan_in", "truncated_normal"]),
    ("variance_scaling", "float32", 5, 3, ["1.0", "fan_out", "untruncated_normal"]),
    ("variance_scaling", "float64", 5, 3, ["0.5", "fan_avg", "uniform"]),
    ("variance_scaling", "float32", None, 9, ["1.0", "fan_avg", "normal"]),
    ("glorot_uniform", "float32", 5, 3, []),
    ("glorot_uniform", "float64", None, 1, []),
    ("glorot_normal", "float32", 5, 3, []),
]
INIT_SHAPE = [4, 5, 6]


def tf_initializer(name, dt, seed, args):
    dtype = tf.as_dtype(dt)
    if name == "random_uniform":
        kw = {"minval": int(args[0]) if dt.startswith("int") else float(args[0]),
              "maxval": int(args[1]) if dt.startswith("int") else float(args[1])} if args else {}
        return tf1.random_uniform_initializer(seed=seed, dtype=dtype, **kw)
    if name in ("random_normal", "truncated_normal"):
        kw = {"mean": float(args[0]), "stddev": float(args[1])} if args else {}
        cls = tf1.random_normal_initializer if name == "random_normal" else tf1.truncated_normal_initializer
        return cls(seed=seed, dtype=dtype, **kw)
    if name == "uniform_unit_scaling":
        return tf1.uniform_unit_scaling_initializer(factor=float(args[0]), seed=seed, dtype=dtype)
    if name == "variance_scaling":
        return tf1.variance_scaling_initializer(scale=float(args[0]), mode=args[1],
                                                distribution=args[2], seed=seed, dtype=dtype)
    cls = tf1.glorot_uniform_initializer if name == "glorot_uniform" else tf1.glorot_normal_initializer
    return cls(seed=seed, dtype=dtype)


def run_varstate_init(tmp_path, cases, calls):
    with open(tmp_path / "init.txt", "w") as f:
        for i, (name, dt, gs, os_, args) in enumerate(cases):
            f.write(" ".join([f"i{i}", name, dt, ",".join(map(str, INIT_SHAPE)), fmt(gs), fmt(os_),
                              str(calls), *args]) + "\n")
    tool("init", tmp_path / "init.txt", tmp_path / "init_out.txt")
    return read_tensors(tmp_path / "init_out.txt")


def test_initializers_equal_tensorflow(tmp_path):
    got = run_varstate_init(tmp_path, INIT_CASES, 1)
    for i, (name, dt, gs, os_, args) in enumerate(INIT_CASES):
        init = tf_initializer(name, dt, os_, args)
        want = tf_run(lambda: init(INIT_SHAPE, dtype=tf.as_dtype(dt)), gs)
        g = got[f"i{i}#0"]
        assert g.dtype == want.dtype and g.shape == want.shape, name
        exact = (name in ("random_uniform", "glorot_uniform", "uniform_unit_scaling")
                 or args[2:] == ["uniform"])
        if exact or dt.startswith("int"):
            assert same_bits(g, want), (name, dt, args)
        else:
            worst = int(ulp_diff(g, want).max())
            assert worst <= ULP_BOUND[dt], (name, dt, args, f"{worst} ulps")


SEED_RULE_CASES = [(name, "float32", gs, None, args)
                   for name, args in [("glorot_uniform", []), ("random_normal", []),
                                      ("truncated_normal", []), ("random_uniform", []),
                                      ("variance_scaling", ["1.0", "fan_in", "uniform"])]
                   for gs in (None, 5)]


def test_one_initializer_twice_without_op_seed_differs(tmp_path):
    """TensorFlow makes a new random op per call; without an op seed each gets
    its own seed pair, so two variables never share (symmetric) values."""
    got = run_varstate_init(tmp_path, SEED_RULE_CASES, 2)
    for i, (name, _, gs, _, args) in enumerate(SEED_RULE_CASES):
        init = tf_initializer(name, "float32", None, args)
        a, b = tf_run(lambda: [init(INIT_SHAPE), init(INIT_SHAPE)], gs)
        assert not np.array_equal(a, b), ("TF", name, gs)
        assert not np.array_equal(got[f"i{i}#0"], got[f"i{i}#1"]), (name, gs)


def test_one_initializer_twice_with_op_seed_repeats(tmp_path):
    cases = [(name, dt, gs, 7, args) for name, dt, gs, _, args in SEED_RULE_CASES]
    got = run_varstate_init(tmp_path, cases, 2)
    for i, (name, _, gs, os_, args) in enumerate(cases):
        init = tf_initializer(name, "float32", os_, args)
        a, b = tf_run(lambda: [init(INIT_SHAPE), init(INIT_SHAPE)], gs)
        assert same_bits(a, b), ("TF", name, gs)
        assert same_bits(got[f"i{i}#0"], got[f"i{i}#1"]), (name, gs)


def test_repeated_random_ops_under_graph_seed_differ(tmp_path):
    with open(tmp_path / "spec.txt", "w") as f:
        f.write("a uniform float32 16 5 - - -\n+b uniform float32 16 5 - - -\n")
        f.write("c normal float32 16 5 - - -\n+d normal float32 16 5 - - -\n")
    tool("random", tmp_path / "spec.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    a, b = tf_run(lambda: [tf1.random_uniform([16]), tf1.random_uniform([16])], 5)
    assert not np.array_equal(a, b)
    assert not np.array_equal(got["a"], got["+b"])
    assert not np.array_equal(got["c"], got["+d"])
    # a fresh graph built the same way repeats them (TF: same _last_id)
    tool("random", tmp_path / "spec.txt", tmp_path / "again.txt")
    again = read_tensors(tmp_path / "again.txt")
    assert all(same_bits(again[k], got[k]) for k in got)
