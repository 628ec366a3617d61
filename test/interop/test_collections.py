"""get_collection(key, scope) and the per-kind helpers (global_variables(scope),
...) against TensorFlow's: the same graph built on both sides, the same
queries, the names of the items returned compared in order."""
from conftest import read_tensors, tf1, tool

QUERIES = [
    ("get_collection", "mixed", None), ("get_collection", "mixed", "enc"),
    ("get_collection", "mixed", "enc/[xs]"), ("get_collection", "mixed", "enc/.*:0$"),
    ("get_collection", "mixed", "x"), ("get_collection", "mixed", "(enc|dec)/(e|s)"),
    ("get_collection", "variables", None), ("get_collection", "variables", "enc"),
    ("get_collection", "variables", "enc/"), ("get_collection", "variables", ".*/w"),
    ("get_collection", "variables", "w"), ("get_collection", "variables", r"enc/emb/part_\d"),
    ("get_collection", "trainable_variables", "dec"), ("get_collection", "nothing", "enc"),
    ("get_collection", "nothing", None),
    ("global_variables", None, None), ("global_variables", None, "enc"),
    ("global_variables", None, "dec/(m|a)"), ("trainable_variables", None, None),
    ("trainable_variables", None, "enc"), ("trainable_variables", None, "encoder"),
    ("local_variables", None, None), ("local_variables", None, "dec"),
    ("local_variables", None, "enc"), ("model_variables", None, "dec/m"),
    ("model_variables", None, "enc"), ("moving_average_variables", None, "dec"),
    ("moving_average_variables", None, "dec/m"),
]


def build_graph():
    """interop_tool's build_collection_graph, in TensorFlow."""
    with tf1.variable_scope("enc"):
        tf1.get_variable("w", [2])
        emb = tf1.get_variable("emb", [4, 2], partitioner=tf1.fixed_size_partitioner(2))
        tf1.add_to_collection("mixed", emb)
    with tf1.variable_scope("encoder"):
        tf1.get_variable("w", [2], trainable=False)
    with tf1.variable_scope("dec"):
        tf1.get_variable("local", [2], collections=[tf1.GraphKeys.LOCAL_VARIABLES])
        tf1.get_variable("model", [2], collections=[tf1.GraphKeys.GLOBAL_VARIABLES,
                                                    tf1.GraphKeys.MODEL_VARIABLES])
        tf1.get_variable("avg", [2], trainable=False,
                         collections=[tf1.GraphKeys.GLOBAL_VARIABLES,
                                      tf1.GraphKeys.MOVING_AVERAGE_VARIABLES])
    tf1.add_to_collection("mixed", tf1.placeholder(tf1.float32, [2], name="enc/x"))
    tf1.add_to_collection("mixed", tf1.no_op(name="enc/step"))
    tf1.add_to_collection("mixed", "enc/unnamed")
    tf1.add_to_collection("mixed", 7)


def name_of(item):
    if hasattr(item, "name"):
        return item.name
    return f"{type(item).__name__}:{item}"


def run_query(func, key, scope):
    if func == "get_collection":
        return tf1.get_collection(key, scope)
    return getattr(tf1, func)(scope)


def hex_or_dash(text):
    return "-" if text is None else text.encode("utf-8").hex()


def test_collections_filtered_by_scope_equal_tensorflow(tmp_path):
    with open(tmp_path / "queries.txt", "w") as f:
        for i, (func, key, scope) in enumerate(QUERIES):
            f.write(f"q{i} {func} {hex_or_dash(key)} {hex_or_dash(scope)}\n")
    tool("collection", tmp_path / "queries.txt", tmp_path / "out.txt")
    got = read_tensors(tmp_path / "out.txt")
    with tf1.Graph().as_default():
        build_graph()
        for i, query in enumerate(QUERIES):
            want = [name_of(item) for item in run_query(*query)]
            names = [bytes(n).decode("utf-8") for n in got[f"q{i}"].reshape(-1)]
            assert names == want, (query, names, want)
