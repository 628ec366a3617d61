"""Variable sharing (variable_scope / get_variable) against TensorFlow: the
cases of interop_tool's `sharing` command (sharing_cases.cc) run in TF graph
mode under the same names. Each outcome is "ok RESULT" or "ErrorClass
MESSAGE"; messages are compared exactly except where they print shapes
(TensorFlow writes (10, 1), varstate [10, 1]) or where varstate checks
earlier with its own message (CLASS_ONLY)."""
from conftest import tf, tf1, tool

# {11, 1} and {INT64_MAX, 1}: TensorFlow fails once ten parts exist with
# "Expected 0 <= offset < shape ..."; varstate checks the counts first.
CLASS_ONLY = {"partition_11", "partition_int64_max", "partition_rank"}


def kind(v):
    partitioned = type(v).__name__ == "PartitionedVariable"
    return ("partitioned " if partitioned else "variable ") + v.name


def make(name, shape):
    return tf1.get_variable(name, shape, use_resource=False)


def reuse_name(r):
    return "auto" if r is tf1.AUTO_REUSE else str(bool(r))


def reuse_false():
    with tf1.variable_scope("a", reuse=False):
        make("v", [1])
    with tf1.variable_scope("a", reuse=True) as a:
        with tf1.variable_scope("b", reuse=False) as b:
            with tf1.variable_scope(a, reuse=False):
                return reuse_name(b.reuse) + " " + tf1.get_variable("v").name


def auto_reuse():
    with tf1.variable_scope("a", reuse=tf1.AUTO_REUSE) as a:
        same = make("v", [1]) is make("v", [1])
        with tf1.variable_scope("b") as b:
            nested = make("x", [1]) is make("x", [1])
            with tf1.variable_scope("c", reuse=True) as c:
                c_reuse = reuse_name(c.reuse)
            return f"{int(same)} {int(nested)} {reuse_name(a.reuse)} {reuse_name(b.reuse)} {c_reuse}"


def custom_getters():
    log = []

    def logger(tag):
        def custom_getter(getter, name, *args, **kwargs):
            log.append(f"{tag}:{name},")
            return getter(name, *args, **kwargs)
        return custom_getter

    with tf1.variable_scope("a", custom_getter=logger("outer")):
        with tf1.variable_scope("b", custom_getter=logger("inner")):
            tf1.get_variable("v", [1], custom_getter=logger("call"), use_resource=False)
            make("w", [1])
    return "".join(log)


def reuse_partitioned():
    with tf1.variable_scope("a", partitioner=tf1.fixed_size_partitioner(2)):
        make("v", [4, 1])
    with tf1.variable_scope("a", reuse=True):
        return kind(tf1.get_variable("v"))


def unpartitioned_after_partitioned(reuse):
    with tf1.variable_scope("a", partitioner=tf1.fixed_size_partitioner(2)):
        make("w", [4, 1])
    with tf1.variable_scope("a", reuse=reuse):
        return kind(make("w", [4, 1]))


def scalar_under_partitioner():
    with tf1.variable_scope("a", partitioner=tf1.fixed_size_partitioner(2)):
        return kind(make("s", []))


def string_default():
    v = tf1.get_variable("s", [2], dtype=tf.string, use_resource=False)
    with tf1.Session() as sess:
        sess.run(v.initializer)
        return "".join(f"[{s.decode()}]" for s in sess.run(v))


def caching_function():
    calls = []

    def fn(op):
        calls.append(f"{op.name} {op.type},")
        return "/cpu:0"

    with tf1.variable_scope("a", caching_device=fn):
        make("v", [1])
    tf1.get_variable("w", [1], caching_device=fn, use_resource=False)
    return "".join(calls)


def partition_counts(counts):
    return kind(tf1.get_variable("p", [10, 1], partitioner=lambda shape, dtype: counts,
                                 use_resource=False))


def variable_scope_name(name):
    with tf1.variable_scope(name) as s:
        return s.name


def nested(name):
    with tf1.variable_scope("s"):
        with tf1.variable_scope(name) as s:
            return s.name + " " + kind(make(name, [1]))


def cases():
    out = {
        "reuse_false": reuse_false,
        "auto_reuse": auto_reuse,
        "custom_getters": custom_getters,
        "reuse_partitioned": reuse_partitioned,
        "unpartitioned_after_partitioned": lambda: unpartitioned_after_partitioned(False),
        "unpartitioned_after_partitioned_auto":
            lambda: unpartitioned_after_partitioned(tf1.AUTO_REUSE),
        "scalar_under_partitioner": scalar_under_partitioner,
        "string_default": string_default,
        "caching_function": caching_function,
        "partition_11": lambda: partition_counts([11, 1]),
        "partition_int64_max": lambda: partition_counts([2**63 - 1, 1]),
        "partition_0": lambda: partition_counts([0, 1]),
        "partition_rank": lambda: partition_counts([2]),
        "partition_10": lambda: partition_counts([10, 1]),
    }
    for name in ["a b", "a:0", "/abs", "-a", "_a", ".a", "a>b"]:
        out[f"get_variable {name}"] = lambda name=name: kind(make(name, [1]))
        out[f"variable_scope {name}"] = lambda name=name: variable_scope_name(name)
        out[f"nested {name}"] = lambda name=name: nested(name)
    return out


def outcome(fn):
    with tf1.Graph().as_default():
        try:
            return "ok " + fn()
        except (ValueError, TypeError) as e:
            return f"{type(e).__name__} {e}"


def test_sharing_equals_tensorflow(tmp_path):
    tool("sharing", tmp_path / "sharing.txt")
    got = dict(line.rstrip("\n").split("\t", 1) for line in open(tmp_path / "sharing.txt"))
    want = {name: outcome(fn) for name, fn in cases().items()}
    assert set(got) == set(want)
    for name in want:
        if name in CLASS_ONLY:
            assert got[name].split()[0] == want[name].split()[0], (name, got[name], want[name])
        else:
            assert got[name] == want[name], (name, got[name], want[name])
