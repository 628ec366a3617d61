"""Items 1, 2 and 8 of the interop suite: checkpoints both ways.

TensorFlow reads what varstate's Saver writes (every dtype, scalars, empty
tensors, non-ASCII names, one shard per device, partitioned variables) and
varstate reads what TensorFlow's Saver writes (V2, sharded over several CPU
devices, partitioned and re-partitioned, V1, and TF2 object-based
checkpoints)."""
import os

import numpy as np
import pytest

from conftest import encode, read_tensors, same_bits, tf, tf1, tool, write_tensors

RNG = np.random.default_rng(20261124)

QUANTIZED = {"qint8": np.int8, "quint8": np.uint8, "qint16": np.int16,
             "quint16": np.uint16, "qint32": np.int32}


def sample(name, shape):
    """Values of TF dtype `name` with extreme values included."""
    n = int(np.prod(shape)) if shape else 1
    if name == "string":
        pool = [b"", b"a", "\u00e9t\u00e9 \u65e5\u672c".encode(), bytes(range(256)), b"x" * 300]
        vals = [pool[i % len(pool)] for i in range(n)]
        return np.array(vals, dtype=object).reshape(shape)
    if name == "bool":
        return (RNG.integers(0, 2, n) == 1).reshape(shape)
    if name in QUANTIZED:
        info = np.iinfo(QUANTIZED[name])
        vals = RNG.integers(info.min, info.max, n, endpoint=True, dtype=QUANTIZED[name])
        return vals.reshape(shape)
    dt = tf.as_dtype(name).as_numpy_dtype
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        vals = RNG.integers(info.min, info.max, n, endpoint=True, dtype=dt)
        if n >= 2:
            vals[0], vals[1] = info.min, info.max
        return vals.reshape(shape)
    if name in ("complex64", "complex128"):
        vals = (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(dt)
        return vals.reshape(shape)
    vals = (RNG.standard_normal(n) * 100).astype(dt)
    if n >= 4:
        vals[0], vals[1], vals[2], vals[3] = np.inf, -np.inf, -0.0, np.nan
    return vals.reshape(shape)


NUMERIC = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "complex64", "complex128", "bool", "string"]
ALL = NUMERIC + list(QUANTIZED)


def enum_of(name):
    return tf.as_dtype(name).as_datatype_enum


def varstate_tensors():
    """name -> (dtype name, array): every dtype in several shapes."""
    out = {}
    for name in ALL:
        out[f"v_{name}"] = (name, sample(name, [3, 5]))
        out[f"scalar/{name}"] = (name, sample(name, []))
        out[f"empty/{name}"] = (name, sample(name, [0, 4]))
    out["caf\u00e9/\u65e5\u672c\u8a9e"] = ("float32", sample("float32", [2, 2]))
    out["big"] = ("float64", sample("float64", [1000, 70]))
    return out


def test_tf_reads_every_dtype(tmp_path):
    tensors = varstate_tensors()
    write_tensors(tmp_path / "vars.txt",
                  [encode(k, a, enum_of(d)) for k, (d, a) in tensors.items()])
    prefix = str(tmp_path / "model")
    tool("save", tmp_path / "vars.txt", prefix)
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
    assert set(dtypes) == set(tensors)
    for key, (name, arr) in tensors.items():
        assert dtypes[key] == tf.as_dtype(name), key
        assert shapes[key] == list(arr.shape), key
        got = reader.get_tensor(key)
        assert same_bits(got, arr), key


def test_tf_reads_compacted_incremental_checkpoint(tmp_path):
    """A base and two deltas (rows 1 and n-1 set to row 0), compacted: TF reads
    the chain's values; each delta is itself a bundle TF opens."""
    tensors = varstate_tensors()
    write_tensors(tmp_path / "vars.txt",
                  [encode(k, a, enum_of(d)) for k, (d, a) in tensors.items()])
    prefix = str(tmp_path / "model")
    compacted = str(tmp_path / "compacted")
    tool("save_chain", tmp_path / "vars.txt", prefix, compacted)
    reader = tf.train.load_checkpoint(compacted)
    assert set(reader.get_variable_to_shape_map()) == set(tensors)
    for key, (name, arr) in tensors.items():
        want = np.array(arr, copy=True)
        if name != "string" and want.ndim >= 1 and want.shape[0] >= 2:
            want[1] = want[0]
            want[-1] = want[0]
        assert same_bits(reader.get_tensor(key), want), key
    delta = tf.train.load_checkpoint(prefix + "-2")
    keys = delta.get_variable_to_shape_map()
    assert "big/.delta_ids" in keys and "big/.delta_rows" in keys
    assert list(delta.get_tensor("big/.delta_ids")) == [999]
    assert same_bits(delta.get_tensor("big/.delta_rows")[0], tensors["big"][1][0])


def test_tf_saver_restores_into_tf_variables(tmp_path):
    """tf.compat.v1.train.Saver.restore into TF variables (quantized types
    cannot be TF variables: DT_QINT* has no Assign kernel)."""
    tensors = {k: v for k, v in varstate_tensors().items() if v[0] not in QUANTIZED}
    write_tensors(tmp_path / "vars.txt",
                  [encode(k, a, enum_of(d)) for k, (d, a) in tensors.items()])
    prefix = str(tmp_path / "model")
    tool("save", tmp_path / "vars.txt", prefix)
    with tf1.Graph().as_default():
        tf_vars = {}
        for key, (name, arr) in tensors.items():
            tf_vars[key] = tf1.Variable(tf.zeros(arr.shape, tf.as_dtype(name)),
                                        name=f"tfvar{len(tf_vars)}")
        saver = tf1.train.Saver(var_list=tf_vars)
        with tf1.Session() as sess:
            saver.restore(sess, prefix)
            values = sess.run(tf_vars)
    for key, (name, arr) in tensors.items():
        assert same_bits(values[key], arr), key


def test_tf_reads_one_shard_per_device(tmp_path):
    devices = ["/job:ps/task:0/device:CPU:0", "/job:ps/task:1/device:CPU:0",
               "/job:ps/task:2/device:CPU:0"]
    tensors = {f"w{i}": sample("float32", [4, i + 1]) for i in range(6)}
    lines = [encode(k, a) + f" {devices[i % 3]}" for i, (k, a) in enumerate(tensors.items())]
    write_tensors(tmp_path / "vars.txt", lines)
    prefix = str(tmp_path / "sharded")
    tool("save", tmp_path / "vars.txt", prefix, "sharded")
    shards = sorted(f for f in os.listdir(tmp_path) if ".data-" in f)
    assert shards == [f"sharded.data-0000{i}-of-00003" for i in range(3)]
    reader = tf.train.load_checkpoint(prefix)
    for key, arr in tensors.items():
        assert same_bits(reader.get_tensor(key), arr), key


def test_tf_reads_and_repartitions_partitioned_variable(tmp_path):
    full = sample("float32", [7, 3])
    lines = [encode("emb", full[0:4]) + " - 7,3;0,0",
             encode("emb", full[4:7]) + " - 7,3;4,0",
             encode("other", full)]
    write_tensors(tmp_path / "vars.txt", lines)
    prefix = str(tmp_path / "part")
    tool("save", tmp_path / "vars.txt", prefix)
    reader = tf.train.load_checkpoint(prefix)
    assert same_bits(reader.get_tensor("emb"), full)
    with tf1.Graph().as_default():
        emb = tf1.get_variable("emb", shape=[7, 3], dtype=tf.float32,
                               partitioner=tf1.fixed_size_partitioner(3))
        saver = tf1.train.Saver(var_list={"emb": emb})
        with tf1.Session() as sess:
            saver.restore(sess, prefix)
            parts = sess.run(list(emb))
    assert [p.shape for p in parts] == [(3, 3), (2, 3), (2, 3)]
    assert same_bits(np.concatenate(parts), full)


def tf_variables(tensors, device_of=lambda i: None):
    out = {}
    for i, (key, (name, arr)) in enumerate(tensors.items()):
        with tf1.device(device_of(i)):
            out[key] = tf1.Variable(arr if name != "string" else arr.astype(object),
                                    dtype=tf.as_dtype(name), name=key)
    return out


def check_dump(prefix, tensors, tmp_path):
    tool("dump", prefix, tmp_path / "dump.txt")
    got = read_tensors(tmp_path / "dump.txt")
    assert set(got) == set(tensors)
    for key, (_, arr) in tensors.items():
        assert same_bits(got[key], arr), key


def tf_tensors():
    out = {}
    for name in NUMERIC:
        out[f"t_{name}"] = (name, sample(name, [4, 3]))
        out[f"scalar_{name}"] = (name, sample(name, []))
        out[f"empty_{name}"] = (name, sample(name, [0, 2]))
    return out


def test_varstate_reads_tf_checkpoint(tmp_path):
    tensors = tf_tensors()
    prefix = str(tmp_path / "tf")
    with tf1.Graph().as_default():
        tf_variables(tensors)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False)
    check_dump(prefix, tensors, tmp_path)
    # and a Saver restores them into varstate variables
    write_tensors(tmp_path / "vars.txt",
                  [encode(k, a, enum_of(d)) for k, (d, a) in tensors.items()])
    tool("restore", prefix, tmp_path / "vars.txt", tmp_path / "restored.txt")
    got = read_tensors(tmp_path / "restored.txt")
    for key, (_, arr) in tensors.items():
        assert same_bits(got[key], arr), key


def test_varstate_reads_tf_sharded_over_devices(tmp_path):
    tensors = {f"s{i}": ("float32", sample("float32", [3, i + 1])) for i in range(6)}
    prefix = str(tmp_path / "sharded")
    with tf1.Graph().as_default():
        tf_variables(tensors, device_of=lambda i: f"/cpu:{i % 3}")
        saver = tf1.train.Saver(sharded=True)
        config = tf1.ConfigProto(device_count={"CPU": 3})
        with tf1.Session(config=config) as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False)
    assert len([f for f in os.listdir(tmp_path) if ".data-" in f]) == 3
    check_dump(prefix, tensors, tmp_path)


def test_varstate_repartitions_tf_partitioned_variable(tmp_path):
    prefix = str(tmp_path / "part")
    with tf1.Graph().as_default():
        emb = tf1.get_variable("emb", shape=[7, 3], dtype=tf.float32,
                               initializer=tf1.random_uniform_initializer(seed=3),
                               partitioner=tf1.fixed_size_partitioner(3))
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            full = sess.run(emb.as_tensor())
            saver.save(sess, prefix, write_meta_graph=False)
    zeros = np.zeros
    lines = [encode("emb", zeros([4, 3], np.float32)) + " - 7,3;0,0",
             encode("emb", zeros([3, 3], np.float32)) + " - 7,3;4,0"]
    write_tensors(tmp_path / "vars.txt", lines)
    tool("restore", prefix, tmp_path / "vars.txt", tmp_path / "parts.txt")
    got = read_tensors(tmp_path / "parts.txt")
    assert same_bits(got["emb@0,0"], full[0:4]) and same_bits(got["emb@4,0"], full[4:7])
    # ...and into one unpartitioned variable
    write_tensors(tmp_path / "whole.txt", [encode("emb", zeros([7, 3], np.float32))])
    tool("restore", prefix, tmp_path / "whole.txt", tmp_path / "whole_out.txt")
    assert same_bits(read_tensors(tmp_path / "whole_out.txt")["emb"], full)


# TF's V1 writer (SaveSlices) has no bfloat16, uint32 or uint64.
V1_DTYPES = [d for d in NUMERIC if d not in ("bfloat16", "uint32", "uint64")]


def test_varstate_reads_tf_v1_checkpoint(tmp_path):
    tensors = {k: v for k, v in tf_tensors().items() if v[0] in V1_DTYPES}
    prefix = str(tmp_path / "v1")
    with tf1.Graph().as_default():
        tf_variables(tensors)
        saver = tf1.train.Saver(write_version=tf1.train.SaverDef.V1)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            path = saver.save(sess, prefix, write_meta_graph=False)
    assert os.path.isfile(path)
    check_dump(path, tensors, tmp_path)


def test_varstate_reads_tf2_object_checkpoint(tmp_path):
    with tf1.Graph().as_default():
        dense = tf.Variable(sample("float32", [3, 4]), name="kernel")
        step = tf.Variable(np.int64(42), name="step")
        ckpt = tf1.train.Checkpoint(model=tf1.train.Checkpoint(kernel=dense), step=step)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            prefix = ckpt.save(str(tmp_path / "obj"), session=sess)
            want = sess.run({"model/kernel": dense, "step": step})
    tool("dump", prefix, tmp_path / "dump.txt")
    got = read_tensors(tmp_path / "dump.txt")
    assert same_bits(got["model/kernel/.ATTRIBUTES/VARIABLE_VALUE"], want["model/kernel"])
    assert same_bits(got["step/.ATTRIBUTES/VARIABLE_VALUE"], want["step"])
    assert "_CHECKPOINTABLE_OBJECT_GRAPH" in got
    # and restored into varstate variables named by those keys
    write_tensors(tmp_path / "vars.txt",
                  [encode("model/kernel/.ATTRIBUTES/VARIABLE_VALUE", np.zeros([3, 4], np.float32))])
    tool("restore", prefix, tmp_path / "vars.txt", tmp_path / "restored.txt")
    restored = read_tensors(tmp_path / "restored.txt")
    assert same_bits(restored["model/kernel/.ATTRIBUTES/VARIABLE_VALUE"], want["model/kernel"])


# What TF's V1 CheckpointReader.get_tensor can hand out (its
# TensorSliceReader, also for files TF writes); the Saver restores every V1 dtype.
V1_READER_DTYPES = ["float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                    "string"]


def test_tf_restores_varstate_v1_checkpoint(tmp_path):
    """Item 8: Saver(write_version=V1) files restore in TensorFlow."""
    tensors = {k: v for k, v in varstate_tensors().items()
               if v[0] in V1_DTYPES or v[0] in QUANTIZED}
    full = sample("float32", [5, 2])
    lines = [encode(k, a, enum_of(d)) for k, (d, a) in tensors.items()]
    lines += [encode("emb", full[0:2]) + " - 5,2;0,0", encode("emb", full[2:5]) + " - 5,2;2,0"]
    write_tensors(tmp_path / "vars.txt", lines)
    prefix = str(tmp_path / "v1model")
    tool("save", tmp_path / "vars.txt", prefix, "v1")
    assert os.path.isfile(prefix)
    reader = tf.train.load_checkpoint(prefix)
    # (TF's V1 reader hands out no sliced tensor: "Sliced checkpoints are not
    # supported"; the Saver below restores it.)
    assert reader.get_variable_to_shape_map()["emb"] == [5, 2]
    for key, (name, arr) in tensors.items():
        assert reader.get_variable_to_dtype_map()[key] == tf.as_dtype(name), key
        if name in V1_READER_DTYPES:
            assert same_bits(reader.get_tensor(key), arr), key
    with tf1.Graph().as_default():
        restorable = {k: v for k, v in tensors.items() if v[0] not in QUANTIZED}
        tf_vars = {k: tf1.Variable(tf.zeros(a.shape, tf.as_dtype(d)), name=f"v{i}")
                   for i, (k, (d, a)) in enumerate(restorable.items())}
        emb = tf1.get_variable("emb", shape=[5, 2], partitioner=tf1.fixed_size_partitioner(2))
        saver = tf1.train.Saver(var_list={**tf_vars, "emb": emb})
        with tf1.Session() as sess:
            saver.restore(sess, prefix)
            values = sess.run(tf_vars)
            parts = sess.run(list(emb))
    for key, (_, arr) in restorable.items():
        assert same_bits(values[key], arr), key
    assert same_bits(np.concatenate(parts), full)


def test_tf_restores_varstate_sharded_v1_checkpoint(tmp_path):
    devices = ["/job:ps/task:0", "/job:ps/task:1"]
    tensors = {f"w{i}": sample("float64", [2, i + 1]) for i in range(4)}
    lines = [encode(k, a) + f" {devices[i % 2]}" for i, (k, a) in enumerate(tensors.items())]
    write_tensors(tmp_path / "vars.txt", lines)
    prefix = str(tmp_path / "sh")
    tool("save", tmp_path / "vars.txt", prefix, "sharded", "v1")
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("sh-")) == [
        "sh-00000-of-00002", "sh-00001-of-00002"]
    with tf1.Graph().as_default():
        tf_vars = {k: tf1.Variable(tf.zeros(a.shape, tf.float64), name=k) for k, a in tensors.items()}
        saver = tf1.train.Saver(var_list=tf_vars, write_version=tf1.train.SaverDef.V1)
        with tf1.Session() as sess:
            saver.restore(sess, prefix + "-?????-of-00002")
            values = sess.run(tf_vars)
    for key, arr in tensors.items():
        assert same_bits(values[key], arr), key
