"""What the checkpoint comparisons (compare_tf_checkpoint.py,
compare_torch_checkpoint.py) share with bench_checkpoint: the mixed
variable sizes, making saved files durable, and dropping the page cache
before a timed restore."""
import os

# Element counts, repeated until the total is reached (bench_checkpoint's
# mixed_sizes in checkpoint_bench.cc).
SIZES = [4 << 20, 1 << 20, 256 << 10, 64 << 10, 16 << 10, 4 << 10, 1 << 10]


def mixed_sizes(total_bytes):
    """Element counts of float32 variables of total_bytes in all."""
    left, i, out = total_bytes // 4, 0, []
    while left > 0:
        n = min(SIZES[i % len(SIZES)], left)
        out.append(n)
        left -= n
        i += 1
    return out


def drop_page_cache():
    """Writes dirty pages back and drops the page cache; False when this
    process may not (not root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def fsync_files(paths):
    """fsyncs each file, then the folder of the first."""
    for path in list(paths) + [os.path.dirname(paths[0]) or "."]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
