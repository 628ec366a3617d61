"""Device placement against TensorFlow: the device-scope nestings of
interop_tool's `placement` command (placement_cases.cc) built in TF graph
mode. For each, the device a reference variable and a NoOp get must be the
same strings (TensorFlow applies the innermost scope first; tf.device(None)
and replica_device_setter(0) ignore the enclosing scopes)."""
import contextlib

from conftest import tf1, tool

SETTER = tf1.train.replica_device_setter


def device(spec):
    return lambda: tf1.device(spec)


def setter(**kwargs):
    return lambda: tf1.device(SETTER(**kwargs))


CASES = {
    "strings_nested": [device("/job:ps/task:1"), device("/device:CPU:0")],
    "inner_job_wins": [device("/job:ps/task:1"), device("/job:worker")],
    "setter_in_ps_task": [device("/job:ps/task:5"), setter(ps_tasks=2)],
    "setter_in_other_job": [device("/job:other"), setter(ps_tasks=2)],
    "setter_in_worker_task": [device("/job:worker/task:7"), setter(ps_tasks=1)],
    "setter_in_cpu": [device("/device:CPU:0"), setter(ps_tasks=2)],
    "setter_no_merge_in_cpu": [device("/device:CPU:0"), setter(ps_tasks=2, merge_devices=False)],
    "setter_no_merge_around_worker": [setter(ps_tasks=2, merge_devices=False),
                                      device("/job:worker/device:CPU:0")],
    "setter_around_cpu": [setter(ps_tasks=2), device("/device:CPU:0")],
    "none_in_job": [device("/job:foo"), device(None)],
    "none_then_cpu": [device("/job:foo/task:2"), device(None), device("/device:CPU:0")],
    "setter_zero_in_job": [device("/job:foo"), lambda: tf1.device(SETTER(0))],
    "setter_zero_options_in_job": [device("/job:foo"), setter(ps_tasks=0)],
    "empty_string_in_job": [device("/job:foo"), device("")],
}


def tensorflow_devices(scopes):
    with tf1.Graph().as_default(), contextlib.ExitStack() as stack:
        for scope in scopes:
            stack.enter_context(scope())
        variable = tf1.Variable(1.0, name="v")
        op = tf1.no_op(name="n")
        return variable.op.device, op.device


def test_placement_equals_tensorflow(tmp_path):
    tool("placement", tmp_path / "placement.txt")
    got = {}
    for line in open(tmp_path / "placement.txt"):
        name, var_device, op_device = line.rstrip("\n").split("\t")
        got[name] = (var_device, op_device)
    assert set(got) == set(CASES)
    for name, scopes in CASES.items():
        assert got[name] == tensorflow_devices(scopes), name
