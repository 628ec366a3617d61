"""Moving averages against TensorFlow's tf.compat.v1.train.ExponentialMovingAverage
and assign_moving_average.

Gradient descent trains "w" (dense gradients), "emb" (IndexedSlices with
duplicate ids) and the float64 "d"; after each step the averages are
updated, in TensorFlow under a control dependency on the training op, in
varstate by running the Op of ema.apply (interop_tool moving_average). Every
variable, average and global_step must agree bit for bit. Checkpoints go
both ways, and each library restores the other's averages into the trained
variables through variables_to_restore(). assign_moving_average with and
without zero_debias must match too, its "v/biased" and "v/local_step"
included."""
import numpy as np
import pytest

from tensorflow.python.training import moving_averages

from conftest import encode, read_tensors, same_bits, tf, tf1, tool, write_tensors

STEPS = 6


def inputs(steps, seed=20261130):
    rng = np.random.default_rng(seed)
    data = {"w": rng.uniform(-1, 1, [4, 3]).astype(np.float32),
            "emb": rng.uniform(-1, 1, [10, 3]).astype(np.float32),
            "d": rng.uniform(-1, 1, [5]).astype(np.float64),
            "v": np.zeros([4, 3], np.float32)}
    for s in range(steps):
        data[f"{s}/w"] = rng.uniform(-1, 1, [4, 3]).astype(np.float32)
        data[f"{s}/d"] = rng.uniform(-1, 1, [5]).astype(np.float64)
        data[f"{s}/emb/values"] = rng.uniform(-1, 1, [5, 3]).astype(np.float32)
        data[f"{s}/emb/indices"] = np.array([s % 10, 3, s % 10, 7, 3], dtype=np.int64)
    return data


def run_tensorflow(mode, data, first, last, restore=None, save=None):
    """Op name -> value of every global variable after steps [first, last)."""
    with tf1.Graph().as_default():
        gw = tf1.placeholder(tf.float32, [4, 3])
        if mode.startswith("assign"):
            v = tf1.Variable(data["v"], name="v")
            trained = [v]
            update = moving_averages.assign_moving_average(v, gw, 0.9,
                                                           zero_debias=mode == "assign")
            saver = tf1.train.Saver()
            feeds = lambda s: {gw: data[f"{s}/w"]}  # noqa: E731
        else:
            w = tf1.Variable(data["w"], name="w")
            emb = tf1.Variable(data["emb"], name="emb")
            d = tf1.Variable(data["d"], name="d")
            step = tf1.Variable(np.int64(0), name="global_step", trainable=False)
            trained = [w, emb, d, step]
            gd = tf1.placeholder(tf.float64, [5])
            gv = tf1.placeholder(tf.float32, [None, 3])
            gi = tf1.placeholder(tf.int64, [None])
            train = tf1.train.GradientDescentOptimizer(0.1).apply_gradients(
                [(gw, w), (tf.IndexedSlices(gv, gi, tf.constant([10, 3], tf.int64)), emb),
                 (gd, d)], global_step=step)
            if mode == "ema_plain":
                ema = tf1.train.ExponentialMovingAverage(0.9)
            else:
                ema = tf1.train.ExponentialMovingAverage(0.99, num_updates=step)
            with tf1.control_dependencies([train]):
                update = ema.apply([w, emb, d])
            if mode == "ema_restore":
                saver = tf1.train.Saver(ema.variables_to_restore())
            else:
                saver = tf1.train.Saver()
            feeds = lambda s: {gw: data[f"{s}/w"], gd: data[f"{s}/d"],  # noqa: E731
                               gv: data[f"{s}/emb/values"], gi: data[f"{s}/emb/indices"]}
        with tf1.Session() as sess:
            # The trained variables first: an average's initializer reads
            # its variable (initialized_value()), which with reference
            # variables must be initialized by then.
            sess.run(tf1.variables_initializer(trained))
            sess.run(tf1.variables_initializer(
                [x for x in tf1.global_variables() if all(x is not t for t in trained)]))
            if restore:
                saver.restore(sess, restore)
            for s in range(first, last):
                sess.run(update, feeds(s))
            out = {v.op.name: sess.run(v) for v in tf1.global_variables()}
            if save:
                saver.save(sess, save, write_meta_graph=False)
    return out


def run_varstate(tmp_path, mode, data, first, last, restore="-", save="-"):
    write_tensors(tmp_path / "in.txt", [encode(k, v) for k, v in data.items()])
    out = tmp_path / f"out_{mode}_{first}_{last}.txt"
    tool("moving_average", mode, tmp_path / "in.txt", first, last, out, restore, save)
    return read_tensors(out)


def compare(got, want):
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert same_bits(got[key], value), key


@pytest.mark.parametrize("mode", ["ema", "ema_plain", "assign", "assign_nodebias"])
def test_moving_average_matches_tensorflow(tmp_path, mode):
    data = inputs(STEPS)
    want = run_tensorflow(mode, data, 0, STEPS)
    got = run_varstate(tmp_path, mode, data, 0, STEPS)
    compare(got, want)
    if mode.startswith("ema"):
        assert got["global_step"] == STEPS
        # The averages moved, and lag the trained values.
        for name in ("w", "emb", "d"):
            avg = got[f"{name}/ExponentialMovingAverage"]
            assert not same_bits(avg, data[name]) and not same_bits(avg, got[name]), name
    else:
        assert not same_bits(got["v"], data["v"])


def test_varstate_checkpoint_continues_in_tensorflow(tmp_path):
    data = inputs(STEPS)
    prefix = str(tmp_path / "varstate")
    run_varstate(tmp_path, "ema", data, 0, 3, "-", prefix)
    continued = run_tensorflow("ema", data, 3, STEPS, restore=prefix)
    compare(continued, run_varstate(tmp_path, "ema", data, 0, STEPS))


def test_tensorflow_checkpoint_continues_in_varstate(tmp_path):
    data = inputs(STEPS)
    prefix = str(tmp_path / "tf")
    run_tensorflow("ema", data, 0, 3, save=prefix)
    continued = run_varstate(tmp_path, "ema", data, 3, STEPS, prefix, "-")
    compare(continued, run_tensorflow("ema", data, 0, STEPS))


def test_variables_to_restore_both_ways(tmp_path):
    """Each library loads the other's averages into the trained variables."""
    data = inputs(STEPS)
    ours, theirs = str(tmp_path / "varstate"), str(tmp_path / "tf")
    trained = run_varstate(tmp_path, "ema", data, 0, STEPS, "-", ours)
    run_tensorflow("ema", data, 0, STEPS, save=theirs)
    for got in (run_tensorflow("ema_restore", data, 0, 0, restore=ours),
                run_varstate(tmp_path, "ema_restore", data, 0, 0, theirs, "-")):
        for name in ("w", "emb", "d"):
            assert same_bits(got[name], trained[f"{name}/ExponentialMovingAverage"]), name
            # The averages themselves are not in the map: initial values.
            assert same_bits(got[f"{name}/ExponentialMovingAverage"], data[name]), name
        assert got["global_step"] == STEPS
