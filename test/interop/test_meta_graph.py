"""Item 3 of the interop suite: meta graphs both ways.

A .meta varstate exports imports in TensorFlow
(tf.compat.v1.train.import_meta_graph): the returned saver restores
varstate's checkpoint and the variables' initializers run, giving their
initial values. A .meta TensorFlow exports imports in varstate: variables,
collections and saver, which restores TensorFlow's checkpoint."""
import os

import numpy as np
import pytest

from conftest import encode, read_tensors, same_bits, tf, tf1, tool, write_tensors
from test_checkpoints import enum_of, sample

DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8",
          "complex64", "bool", "string"]


def varstate_model(tmp_path, sharded=False, v1=False):
    """(prefix, initial values, saved values) of a varstate checkpoint + meta."""
    init, saved, lines_init, lines_saved = {}, {}, [], []
    devices = ["/job:ps/task:0", "/job:ps/task:1"]
    dtypes = [d for d in DTYPES if not (v1 and d == "bfloat16")]
    for i, name in enumerate(dtypes):
        key = f"layer/v_{name}"
        init[key], saved[key] = sample(name, [2, 3]), sample(name, [2, 3])
        dev = devices[i % 2] if sharded else "-"
        lines_init.append(encode(key, init[key], enum_of(name)) + f" {dev}")
        lines_saved.append(encode(key, saved[key], enum_of(name)))
    full_init, full_saved = sample("float32", [5, 2]), sample("float32", [5, 2])
    for lo, hi in [(0, 3), (3, 5)]:
        lines_init.append(encode("emb", full_init[lo:hi]) + f" - 5,2;{lo},0")
        lines_saved.append(encode("emb", full_saved[lo:hi]) + f" - 5,2;{lo},0")
    init["emb"], saved["emb"] = full_init, full_saved
    write_tensors(tmp_path / "init.txt", lines_init)
    write_tensors(tmp_path / "saved.txt", lines_saved)
    prefix = str(tmp_path / "model")
    flags = (["sharded"] if sharded else []) + (["v1"] if v1 else []) + ["deferred"]
    tool("export_meta", tmp_path / "init.txt", tmp_path / "saved.txt", prefix, *flags)
    return prefix, init, saved


def values_by_name(sess):
    """Variable op name -> value; partitions concatenated under 'emb'."""
    out, parts = {}, []
    for v in tf1.global_variables():
        name = v.op.name
        if name.startswith("emb/part_"):
            parts.append((name, v))
        else:
            out[name] = sess.run(v)
    parts.sort(key=lambda p: int(p[0].split("_")[-1]))
    out["emb"] = np.concatenate([sess.run(v) for _, v in parts])
    return out


@pytest.mark.parametrize("sharded,v1", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["v2", "v2-sharded", "v1", "v1-sharded"])
def test_tf_imports_varstate_meta_graph(tmp_path, sharded, v1):
    prefix, init, saved = varstate_model(tmp_path, sharded, v1)
    restore_path = prefix
    if sharded and v1:  # one file per device: ps/task:0, ps/task:1 and the local CPU
        restore_path = prefix + "-?????-of-00003"
        assert os.path.isfile(prefix + "-00002-of-00003")
    with tf1.Graph().as_default():
        # (the shards' /job:ps devices do not exist in this process)
        saver = tf1.train.import_meta_graph(prefix + ".meta", clear_devices=sharded)
        assert saver is not None
        names = sorted(v.op.name for v in tf1.global_variables())
        assert "deferred_w" in names and "emb/part_0" in names and "emb/part_1" in names
        assert sorted(v.op.name for v in tf1.trainable_variables()) == names
        with tf1.Session() as sess:
            saver.restore(sess, restore_path)
            restored = values_by_name(sess)
            sess.run(tf1.global_variables_initializer())
            initial = values_by_name(sess)
            # the imported saver also saves (TF's own save path through our nodes)
            again = saver.save(sess, str(tmp_path / "again"), write_meta_graph=False)
    for key in saved:
        assert same_bits(restored[key], saved[key]), key
        assert same_bits(initial[key], init[key]), key
    with tf1.Graph().as_default():
        want = tf1.glorot_uniform_initializer(seed=3)([4, 3])
        with tf1.Session() as sess:
            want = sess.run(want)
    assert same_bits(initial["deferred_w"], want)
    assert same_bits(restored["deferred_w"], want)
    tool("dump", again, tmp_path / "again.txt")
    got = read_tensors(tmp_path / "again.txt")
    for key in init:
        assert same_bits(got[key], init[key]), key


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_varstate_imports_tf_meta_graph(tmp_path, resource):
    prefix = str(tmp_path / "tf")
    with tf1.Graph().as_default():
        with tf1.variable_scope("net", use_resource=resource):
            w = tf1.get_variable("w", initializer=sample("float32", [3, 4]))
            b = tf1.get_variable("b", initializer=sample("float64", [4]))
            step = tf1.get_variable("step", initializer=np.int64(5), trainable=False)
            emb = tf1.get_variable("emb", shape=[7, 2], partitioner=tf1.fixed_size_partitioner(3),
                                   initializer=tf1.random_uniform_initializer(seed=1))
        tf1.add_to_collection("my_numbers", 42)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            want = sess.run({"net/w": w, "net/b": b, "net/step": step})
            want["net/emb"] = sess.run(emb.as_tensor())
            saver.save(sess, prefix)
    tool("import_meta", prefix + ".meta", prefix, tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    for key in ["net/w", "net/b", "net/step"]:
        assert same_bits(got[key], want[key]), key
    parts = sorted((k for k in got if k.startswith("net/emb/part_")), key=lambda k: int(k[-1]))
    assert len(parts) == 3
    assert same_bits(np.concatenate([got[k] for k in parts]), want["net/emb"])
    trainable = open(str(tmp_path / "out.txt") + ".trainable").read().split()
    assert "net/step" not in trainable and "net/w" in trainable and len(trainable) == 5


def test_tf_reruns_exported_initializers(tmp_path):
    """Initializers are exported as TensorFlow's ops (random ops with their
    seed attrs, scale and shift, Fill, small Consts), not as their values:
    the meta graph stays small, and TensorFlow's initializers give
    varstate's values (uniform bit for bit, normals within the ulp bounds of
    test_random.py before the shift by the mean, so within a few ulps of
    the stddev after it), partitions included."""
    prefix = str(tmp_path / "model")
    tool("export_init_meta", prefix, tmp_path / "values.txt")
    want = read_tensors(tmp_path / "values.txt")
    assert os.path.getsize(prefix + ".meta") < 64 * 1024
    with tf.Graph().as_default():
        tf1.train.import_meta_graph(prefix + ".meta")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            got = {v.op.name: sess.run(v) for v in tf1.global_variables()}
    assert set(got) == set(want)
    for name, w in want.items():
        g = got[name]
        if "normal" in name or name in ("truncated", "scaling"):
            eps = np.finfo(w.dtype).eps
            np.testing.assert_allclose(g, w, rtol=4 * eps, atol=16 * eps, err_msg=name)
        else:
            assert same_bits(g, w), name
