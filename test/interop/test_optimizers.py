"""Optimizers against TensorFlow's tf.compat.v1.train optimizers.

The same gradients — dense for "w" and the float64 "d", IndexedSlices with
duplicate ids for "emb" — go through each optimizer in TensorFlow and in varstate
(interop_tool optimize); every variable, slot, beta power and global_step
must agree after several steps. Then checkpoints carry the optimizer state
both ways: a varstate Adam/Adagrad checkpoint restores into TensorFlow's
optimizer slots and continues to the values varstate reaches, and the
reverse.

Exactness: bit-exact for the optimizers in BIT_EXACT; within TOLERANCE
(relative and absolute, per element, after STEPS steps) for the others, whose
TensorFlow kernels use Eigen's vectorized rsqrt or pow. The checkpoint tests
compare across the libraries after a restore, so they use TOLERANCE too."""
import numpy as np
import pytest

from conftest import encode, read_tensors, same_bits, tf, tf1, tool, write_tensors

STEPS = 6
TOLERANCE = 1e-5

OPTIMIZERS = {
    "sgd": lambda: tf1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda: tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "adagrad": lambda: tf1.train.AdagradOptimizer(0.1),
    "adam": lambda: tf1.train.AdamOptimizer(0.01),
    "rmsprop": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "rmsprop_centered": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5, centered=True),
    "ftrl": lambda: tf1.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01,
                                            l2_regularization_strength=0.02),
    "ftrl_shrinkage": lambda: tf1.train.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=0.05),
    "ftrl_power": lambda: tf1.train.FtrlOptimizer(0.1, learning_rate_power=-0.3),
    "adadelta": lambda: tf1.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-6),
    "proximal_sgd": lambda: tf1.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.05, l2_regularization_strength=0.02),
    "proximal_sgd_l1": lambda: tf1.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.05),
    "proximal_sgd_l2": lambda: tf1.train.ProximalGradientDescentOptimizer(
        0.1, l2_regularization_strength=0.02),
    "proximal_adagrad": lambda: tf1.train.ProximalAdagradOptimizer(
        0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.02),
    "proximal_adagrad_plain": lambda: tf1.train.ProximalAdagradOptimizer(0.1),
    # The graph's "global_step" variable (get_global_step finds it by name).
    "adagrad_da": lambda: tf1.train.AdagradDAOptimizer(
        0.1, tf1.train.get_global_step(), l1_regularization_strength=0.01,
        l2_regularization_strength=0.02),
    "adagrad_da_plain": lambda: tf1.train.AdagradDAOptimizer(0.1, tf1.train.get_global_step()),
}

# Optimizers whose every variable and slot matches TensorFlow's bit for bit
# (with TensorFlow's default graph optimizations, which reassociate sparse
# Adam's g * g * (1 - beta2)). Not Adagrad, Adadelta and proximal Adagrad:
# TensorFlow's Eigen computes their rsqrt() with the CPU's approximate rsqrt
# and a Newton step; nor Ftrl with lr_power != -0.5: Eigen's vectorized pow.
BIT_EXACT = set(OPTIMIZERS) - {"adagrad", "ftrl_power", "adadelta", "proximal_adagrad",
                               "proximal_adagrad_plain"}


# TensorFlow's proximal optimizers pass their float32 hyperparameters to
# the kernels without a cast, so TensorFlow cannot train a float64 variable
# with them (TypeError): those cases leave "d" out.
NO_FLOAT64 = {"proximal_sgd", "proximal_sgd_l1", "proximal_sgd_l2", "proximal_adagrad",
              "proximal_adagrad_plain"}


def inputs(steps, seed=20261125, float64=True):
    rng = np.random.default_rng(seed)
    data = {"w": rng.uniform(-1, 1, [4, 3]).astype(np.float32),
            "emb": rng.uniform(-1, 1, [10, 3]).astype(np.float32),
            "d": rng.uniform(-1, 1, [5]).astype(np.float64)}
    if not float64:
        del data["d"]
    for s in range(steps):
        data[f"{s}/w"] = rng.uniform(-1, 1, [4, 3]).astype(np.float32)
        data[f"{s}/emb/values"] = rng.uniform(-1, 1, [5, 3]).astype(np.float32)
        data[f"{s}/emb/indices"] = np.array([s % 10, 3, s % 10, 7, 3], dtype=np.int64)
        grad_d = rng.uniform(-1, 1, [5]).astype(np.float64)
        if float64:
            data[f"{s}/d"] = grad_d
    return data


def run_tensorflow(name, data, first, last, restore=None, save=None):
    """Op name -> value of every global variable after steps [first, last)."""
    with tf1.Graph().as_default():
        w = tf1.Variable(data["w"], name="w")
        emb = tf1.Variable(data["emb"], name="emb")
        step = tf1.Variable(np.int64(0), name="global_step", trainable=False)
        gw = tf1.placeholder(tf.float32, [4, 3])
        gv = tf1.placeholder(tf.float32, [None, 3])
        gi = tf1.placeholder(tf.int64, [None])
        grads = [(gw, w), (tf.IndexedSlices(gv, gi, tf.constant([10, 3], tf.int64)), emb)]
        feeds = {}
        if "d" in data:
            gd = tf1.placeholder(tf.float64, [5])
            grads.append((gd, tf1.Variable(data["d"], name="d")))
            feeds = {gd: [data[f"{s}/d"] for s in range(first, last)]}
        train = OPTIMIZERS[name]().apply_gradients(grads, global_step=step)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            if restore:
                saver.restore(sess, restore)
            for s in range(first, last):
                feed = {gw: data[f"{s}/w"], gv: data[f"{s}/emb/values"],
                        gi: data[f"{s}/emb/indices"]}
                feed.update({k: v[s - first] for k, v in feeds.items()})
                sess.run(train, feed)
            out = {v.op.name: sess.run(v) for v in tf1.global_variables()}
            if save:
                saver.save(sess, save, write_meta_graph=False)
    return out


def run_varstate(tmp_path, name, data, first, last, restore="-", save="-"):
    lines = [encode(k, v) for k, v in data.items()]
    write_tensors(tmp_path / "in.txt", lines)
    out = tmp_path / f"out_{first}_{last}.txt"
    tool("optimize", name, tmp_path / "in.txt", first, last, out, restore, save)
    return read_tensors(out)


def compare(got, want, exact):
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        if exact or value.dtype == np.int64:
            assert same_bits(got[key], value), key
        else:
            np.testing.assert_allclose(got[key], value, rtol=TOLERANCE, atol=TOLERANCE, err_msg=key)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_tensorflow(tmp_path, name):
    data = inputs(STEPS, float64=name not in NO_FLOAT64)
    want = run_tensorflow(name, data, 0, STEPS)
    got = run_varstate(tmp_path, name, data, 0, STEPS)
    compare(got, want, name in BIT_EXACT)
    assert got["global_step"] == STEPS
    assert not same_bits(got["emb"], data["emb"])


@pytest.mark.parametrize("name", ["adam", "adagrad", "adadelta", "proximal_adagrad", "adagrad_da"])
def test_varstate_checkpoint_continues_in_tensorflow(tmp_path, name):
    data = inputs(STEPS, float64=name not in NO_FLOAT64)
    prefix = str(tmp_path / "varstate")
    run_varstate(tmp_path, name, data, 0, 3, "-", prefix)
    continued = run_tensorflow(name, data, 3, STEPS, restore=prefix)
    uninterrupted = run_varstate(tmp_path, name, data, 0, STEPS)
    compare(continued, uninterrupted, False)
    assert continued["global_step"] == STEPS


@pytest.mark.parametrize("name", ["adam", "adagrad", "adadelta", "proximal_adagrad", "adagrad_da"])
def test_tensorflow_checkpoint_continues_in_varstate(tmp_path, name):
    data = inputs(STEPS, float64=name not in NO_FLOAT64)
    prefix = str(tmp_path / "tf")
    run_tensorflow(name, data, 0, 3, save=prefix)
    continued = run_varstate(tmp_path, name, data, 3, STEPS, prefix, "-")
    uninterrupted = run_tensorflow(name, data, 0, STEPS)
    compare(continued, uninterrupted, False)
    assert continued["global_step"] == STEPS
