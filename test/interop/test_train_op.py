"""Item 4 of the interop suite: a train_op built once, run after import.

varstate exports a meta graph whose collection "train_op" holds an Op over
placeholders, constants, another variable's value, a counter and a
partitioned table; TensorFlow imports it, restores the checkpoint and runs
the Op step after step with feeds, and varstate does the same after its own
import_meta_graph: both end with the same bits. The other way, TensorFlow
builds a train_op from ref or resource variables, and varstate runs it after
import as TensorFlow did."""
import numpy as np
import pytest

from conftest import encode, read_tensors, same_bits, tf1, tool, write_tensors

STEPS = 4


def feeds(step):
    """Step `step`'s values of the placeholders ids, rows and lr."""
    f = np.float32(step)
    ids = np.array([step % 3, 2, (step + 1) % 3], dtype=np.int64)
    rows = np.array([[f, 1], [2 * f, 3], [0.5, f]], dtype=np.float32)
    return {"ids": ids, "rows": rows, "lr": np.float32(0.25) * f}


def write_feeds(path, steps, feed_fn):
    lines = [encode(f"{s}/{name}", value) for s in range(steps) for name, value in feed_fn(s).items()]
    write_tensors(path, lines)


def run_in_tensorflow(meta, checkpoint, steps, feed_fn):
    """Variable op name -> value after `steps` runs of train_op in TensorFlow."""
    with tf1.Graph().as_default():
        saver = tf1.train.import_meta_graph(meta)
        train_ops = tf1.get_collection("train_op")
        assert len(train_ops) == 1
        with tf1.Session() as sess:
            saver.restore(sess, checkpoint)
            for s in range(steps):
                sess.run(train_ops[0], {f"{k}:0": v for k, v in feed_fn(s).items()})
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def test_tensorflow_runs_varstate_train_op(tmp_path):
    prefix = str(tmp_path / "model")
    tool("export_train", prefix)
    want = run_in_tensorflow(prefix + ".meta", prefix, STEPS, feeds)
    write_feeds(tmp_path / "feeds.txt", STEPS, feeds)
    tool("run_train", prefix + ".meta", prefix, tmp_path / "feeds.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert same_bits(got[key], value), key
    assert want["global_step"] == STEPS
    # The partitioned tables took the routed scatter, the broadcast delta and the update.
    def whole(name):
        return np.concatenate([want[f"{name}/part_0"], want[f"{name}/part_1"]])
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    shifted = table.copy()
    for s in range(STEPS):
        f = feeds(s)
        np.subtract.at(table, f["ids"], f["rows"])
        shifted = shifted + f["lr"]
    marks = np.arange(10, dtype=np.float32).reshape(5, 2)
    marks[[4, 0]] = [[7, 8], [9, 10]]
    assert same_bits(whole("table"), table)
    assert same_bits(whole("shifted"), shifted)
    assert same_bits(whole("marks"), marks)


def tf_feeds(step):
    return {"x": np.full([2, 3], step + 0.5, dtype=np.float32),
            "ids": np.array([step % 4, 3], dtype=np.int32),
            "upd": np.array([[step, 1.0], [2.0, step]], dtype=np.float32),
            "top_upd": np.array([step - 1.5, 0.5 * step], dtype=np.float32)}


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_varstate_runs_tensorflow_train_op(tmp_path, resource):
    prefix = str(tmp_path / "tf")
    with tf1.Graph().as_default():
        with tf1.variable_scope("net", use_resource=resource):
            w = tf1.get_variable("w", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
            emb = tf1.get_variable("emb", initializer=np.ones([4, 2], dtype=np.float32))
            top = tf1.get_variable("top", initializer=np.zeros([4], dtype=np.float32))
            step = tf1.get_variable("step", initializer=np.int64(0), trainable=False)
        x = tf1.placeholder(tf1.float32, [2, 3], name="x")
        ids = tf1.placeholder(tf1.int32, [None], name="ids")
        upd = tf1.placeholder(tf1.float32, [None, 2], name="upd")
        top_upd = tf1.placeholder(tf1.float32, [None], name="top_upd")
        # Two updates of w in one group run concurrently in TensorFlow; a ref
        # variable's unlocked read-modify-write can lose one of them (seen in
        # CI: w[0, 0] ended 2.5 short), so both take the variable's lock.
        train_op = tf1.group(
            tf1.assign_add(w, x, use_locking=True),
            tf1.assign_sub(w, tf1.constant(0.25, shape=[2, 3]), use_locking=True),
            tf1.scatter_add(emb, ids, upd), tf1.scatter_max(top, ids, top_upd),
            tf1.count_up_to(step, 10), name="train")
        tf1.add_to_collection("train_op", train_op)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, prefix)
            for s in range(STEPS):
                sess.run(train_op, {f"{k}:0": v for k, v in tf_feeds(s).items()})
            want = {v.op.name: sess.run(v) for v in tf1.global_variables()}
    write_feeds(tmp_path / "feeds.txt", STEPS, tf_feeds)
    proc = tool("run_train", prefix + ".meta", prefix, tmp_path / "feeds.txt",
                tmp_path / "out.txt", expect_ok=False)
    if proc.returncode != 0:
        pytest.fail(proc.stderr)
    got = read_tensors(tmp_path / "out.txt")
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert same_bits(got[key], value), key
    assert want["net/step"] == STEPS
