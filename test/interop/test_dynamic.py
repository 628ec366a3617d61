"""Dynamic (hash-keyed) variables in TensorFlow's checkpoints.

TensorFlow reads a dynamic variable's keys and rows (and its optimizer
slot's) as plain tensors, imports the meta graph of a graph that holds one
and restores its dense variables with that meta graph's saver; varstate
restores a dynamic variable from keys and values TensorFlow wrote."""
import numpy as np

from conftest import read_tensors, same_bits, tf, tf1, tool


def test_tensorflow_reads_keys_and_values(tmp_path):
    prefix = tmp_path / "model"
    out = tmp_path / "expected.txt"
    tool("dynamic_save", prefix, out)
    expected = read_tensors(out)
    reader = tf.train.load_checkpoint(str(prefix))
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    assert dtypes["emb-keys"] == tf.int64
    assert dtypes["emb-values"] == tf.float32
    keys = reader.get_tensor("emb-keys")
    # Ascending, the reserved words and the erased key as expected.
    assert list(keys) == sorted(keys)
    assert np.iinfo(np.int64).min in keys and 0 not in keys and 1000 in keys
    assert shapes["emb-values"] == [len(keys), 3]
    assert same_bits(keys, expected["keys"])
    assert same_bits(reader.get_tensor("emb-values"), expected["values"])
    assert same_bits(reader.get_tensor("emb/Adagrad-keys"), expected["keys"])
    assert same_bits(reader.get_tensor("emb/Adagrad-values"), expected["slot"])
    assert same_bits(reader.get_tensor("dense"), expected["dense"])
    assert "emb" not in shapes


def test_tensorflow_imports_the_meta_graph(tmp_path):
    prefix = tmp_path / "model"
    out = tmp_path / "expected.txt"
    tool("dynamic_save", prefix, out)
    expected = read_tensors(out)
    g = tf1.Graph()
    with g.as_default():
        saver = tf1.train.import_meta_graph(str(prefix) + ".meta", clear_devices=True)
        with tf1.Session() as sess:
            saver.restore(sess, str(prefix))
            dense = [v for v in tf1.global_variables() if v.op.name == "dense"][0]
            assert same_bits(sess.run(dense), expected["dense"])


def test_varstate_restores_keys_and_values_tensorflow_wrote(tmp_path):
    keys = np.array([-2**63, -5, 3, 2**40, 2**63 - 1], dtype=np.int64)
    values = np.arange(len(keys) * 4, dtype=np.float32).reshape(len(keys), 4) / 8
    g = tf1.Graph()
    with g.as_default():
        k = tf1.Variable(keys, name="emb-keys")
        v = tf1.Variable(values, name="emb-values")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            tf1.train.Saver([k, v]).save(sess, str(tmp_path / "tf"))
    out = tmp_path / "restored.txt"
    tool("dynamic_restore", tmp_path / "tf", 4, out)
    restored = read_tensors(out)
    assert same_bits(restored["keys"], keys)
    assert same_bits(restored["values"], values)
