"""init_from_checkpoint against TensorFlow's, on a checkpoint TensorFlow wrote.

TensorFlow saves "pre/w", "pre/b", "pre/emb" (partitioned in 3) and
"other"; then TensorFlow and varstate (interop_tool init_from_checkpoint)
each build "enc/w", "enc/b", "enc/emb" (in 2 parts), "extra" and "kept",
call init_from_checkpoint with {"pre/": "enc/", "other": "extra"} and run
the initializers. Every variable must agree bit for bit, parts included."""
import numpy as np

from conftest import read_tensors, same_bits, tf1, tool


def save_pretrained(prefix):
    rng = np.random.default_rng(20261130)
    with tf1.Graph().as_default():
        with tf1.variable_scope("pre"):
            tf1.get_variable("w", initializer=rng.standard_normal([2, 3]).astype(np.float32))
            tf1.get_variable("b", initializer=rng.standard_normal([3]).astype(np.float32))
            tf1.get_variable("emb", [10, 2], initializer=tf1.random_normal_initializer(seed=7),
                             partitioner=tf1.fixed_size_partitioner(3))
        tf1.get_variable("other", initializer=rng.standard_normal([4]).astype(np.float32))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            tf1.train.Saver().save(sess, prefix, write_meta_graph=False)


def tensorflow_init(prefix):
    with tf1.Graph().as_default():
        with tf1.variable_scope("enc"):
            tf1.get_variable("w", [2, 3])
            tf1.get_variable("b", [3])
            tf1.get_variable("emb", [10, 2], partitioner=tf1.fixed_size_partitioner(2))
        tf1.get_variable("extra", [4])
        tf1.get_variable("kept", [2], initializer=tf1.ones_initializer())
        tf1.train.init_from_checkpoint(prefix, {"pre/": "enc/", "other": "extra"})
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def test_init_from_tensorflow_checkpoint_matches_tensorflow(tmp_path):
    prefix = str(tmp_path / "pretrained")
    save_pretrained(prefix)
    want = tensorflow_init(prefix)
    tool("init_from_checkpoint", prefix, tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert same_bits(got[name], value), name
    assert same_bits(np.concatenate([got["enc/emb/part_0"], got["enc/emb/part_1"]]),
                     tf1.train.load_variable(prefix, "pre/emb"))
