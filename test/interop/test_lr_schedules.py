"""Learning rate decay against TensorFlow's tf.compat.v1.train decay functions.

Each schedule of interop_tool lr_schedule (varstate/learning_rate_decay.h)
is built in a TensorFlow graph on a global_step variable (and a float32
"x" for the float piecewise case, a float64 learning rate variable for the
_f64 cases: TensorFlow's cosine schedules multiply by a float32 pi and
take float32 rates only); both libraries evaluate it at every step 0 .. STEPS - 1 and
the rates must agree bit for bit."""
import numpy as np

from conftest import read_tensors, same_bits, tf, tf1, tool

STEPS = 2500


def schedules(step, x, lr64):
    t = tf1.train
    return {
        "exp": t.exponential_decay(0.1, step, 100, 0.96),
        "exp_stair": t.exponential_decay(0.1, step, 100, 0.96, staircase=True),
        "exp_f64": t.exponential_decay(lr64, step, 100, 0.96),
        "natural_exp": t.natural_exp_decay(0.1, step, 100, 0.5),
        "natural_exp_stair": t.natural_exp_decay(0.1, step, 100, 0.5, staircase=True),
        "inverse_time": t.inverse_time_decay(0.1, step, 100, 0.5),
        "inverse_time_stair": t.inverse_time_decay(0.1, step, 100, 0.5, staircase=True),
        "poly": t.polynomial_decay(0.1, step, 1000),
        "poly_cycle": t.polynomial_decay(0.1, step, 300, 0.001, power=0.5, cycle=True),
        "poly_f64": t.polynomial_decay(lr64, step, 700, 0.003, power=2.0),
        "poly_cube": t.polynomial_decay(0.1, step, 800, 0.0, power=3.0, cycle=True),
        "poly_odd": t.polynomial_decay(0.1, step, 900, 0.01, power=1.7),
        "poly_cube_f64": t.polynomial_decay(lr64, step, 600, 0.01, power=3.0),
        "poly_square": t.polynomial_decay(0.1, step, 500, 0.02, power=2.0),
        "cosine": t.cosine_decay(0.1, step, 1000),
        "cosine_alpha": t.cosine_decay(0.1, step, 1000, alpha=0.1),
        "restarts": t.cosine_decay_restarts(0.1, step, 200),
        "restarts_flat": t.cosine_decay_restarts(0.1, step, 150, t_mul=1.0, m_mul=0.9,
                                                 alpha=0.01),
        "restarts_geometric": t.cosine_decay_restarts(0.1, step, 120, t_mul=1.5, m_mul=0.8,
                                                      alpha=0.02),
        "linear_cosine": t.linear_cosine_decay(0.1, step, 1000, num_periods=2.0, alpha=0.05,
                                               beta=0.01),
        "piecewise": t.piecewise_constant(step, [100, 300], [1.0, 0.5, 0.1]),
        "piecewise_float": t.piecewise_constant(x, [0.5, 1.7], [0.3, 0.2, 0.1]),
    }


def run_tensorflow():
    with tf1.Graph().as_default():
        step = tf1.Variable(np.int64(0), name="global_step", trainable=False)
        x = tf1.Variable(np.float32(0), name="x", trainable=False)
        lr64 = tf1.Variable(np.float64(0.1), name="lr64", trainable=False)
        rates = schedules(step, x, lr64)
        s_in = tf1.placeholder(tf.int64, [])
        x_in = tf1.placeholder(tf.float32, [])
        set_both = tf.group(step.assign(s_in), x.assign(x_in))
        out = {name: [] for name in rates}
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for s in range(STEPS):
                sess.run(set_both, {s_in: s, x_in: np.float32(s) * np.float32(0.0137)})
                for name, value in sess.run(rates).items():
                    out[name].append(value)
    return {name: np.array(values) for name, values in out.items()}


def test_schedules_match_tensorflow(tmp_path):
    want = run_tensorflow()
    tool("lr_schedule", STEPS, tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    assert sorted(got) == sorted(want)
    for name, rates in want.items():
        assert got[name].dtype == rates.dtype, name
        differ = got[name].view(np.uint8).reshape(STEPS, -1) != \
            rates.view(np.uint8).reshape(STEPS, -1)
        steps = np.nonzero(differ.any(axis=1))[0]
        assert steps.size == 0, (
            f"{name}: {steps.size} steps differ, first {steps[0]}: "
            f"{got[name][steps[0]]!r} vs TensorFlow's {rates[steps[0]]!r}")
        # Every schedule moves over the steps (none is a constant by mistake).
        assert len(np.unique(rates)) > 1, name
