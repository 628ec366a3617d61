"""Dynamic (hash-keyed) variables in TensorFlow's checkpoints.

TensorFlow reads a dynamic variable's keys and rows (and its optimizer
slot's) as plain tensors, imports the meta graph of a graph that holds one
and restores its dense variables with that meta graph's saver; varstate
restores a dynamic variable from keys and values TensorFlow wrote;
TensorFlow opens a per-key delta as a plain bundle and reads the
compaction of a chain."""
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


def test_tensorflow_reads_a_compacted_chain_and_the_delta(tmp_path):
    prefix = tmp_path / "model"
    compact = tmp_path / "compact"
    out = tmp_path / "expected.txt"
    tool("dynamic_chain", prefix, compact, out)
    expected = read_tensors(out)
    # The chain compacted: the table's keys and rows as one full save.
    reader = tf.train.load_checkpoint(str(compact))
    assert same_bits(reader.get_tensor("emb-keys"), expected["keys"])
    assert same_bits(reader.get_tensor("emb-values"), expected["values"])
    assert same_bits(reader.get_tensor("emb/Adagrad-keys"), expected["keys"])
    assert same_bits(reader.get_tensor("emb/Adagrad-values"), expected["slot"])
    assert not any(".delta_" in k for k in reader.get_variable_to_shape_map())
    # The delta opens as an ordinary bundle: the keys written and erased
    # since the base, and the rows of the written ones.
    delta = tf.train.load_checkpoint(str(prefix) + "-2")
    shapes = delta.get_variable_to_shape_map()
    written = delta.get_tensor("emb-keys/.delta_keys")
    assert same_bits(written, expected["written"])
    assert same_bits(delta.get_tensor("emb-keys/.delta_erased"), expected["erased"])
    assert shapes["emb-values/.delta_key_rows"] == [len(written), 3]
    assert shapes["emb/Adagrad-values/.delta_key_rows"] == [len(written), 3]
    rows = dict(zip(expected["keys"].tolist(), expected["values"].reshape(-1, 3)))
    got = delta.get_tensor("emb-values/.delta_key_rows")
    for k, row in zip(written.tolist(), got):
        assert same_bits(row, rows[k])
    assert "emb-values" not in shapes
