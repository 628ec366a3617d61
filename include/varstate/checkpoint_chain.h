// Incremental checkpoints: chains of a base and deltas, and their compaction.
//
// Saver::save with {.incremental = true} writes a delta: a V2 tensor bundle
// holding, for each variable, only the rows (along axis 0) changed since the
// previous save of the same saver, and whole tensors for variables that are
// small, mostly changed, or not tracked by rows. The checkpoint it extends
// and so on back to a full (base) checkpoint form its chain:
//
//   Saver saver({.max_to_keep = 5});
//   saver.save(sess, "ckpt/model", {.global_step = 100, .incremental = true});  // base
//   ...  // sparse updates
//   saver.save(sess, "ckpt/model", {.global_step = 200, .incremental = true});  // delta
//   saver.restore(sess, "ckpt/model-200");  // base + delta, bit for bit
//   compact_checkpoint("ckpt/model-200", "export/model");  // one full checkpoint
//
// A delta's bundle holds, besides whole tensors under their usual keys:
//  - "<key>/.delta_ids" (int64, [n]): the changed rows, ascending, in the
//    coordinates of the full tensor;
//  - "<key>/.delta_rows" (the variable's dtype, [n] + shape[1:]): their values;
//    for a partition of a partitioned variable the two keys end in
//    "@<row offset of the part>" ("emb/.delta_ids@4096");
//  - for a dynamic variable's keys tensor "emb-keys": "emb-keys/.delta_keys"
//    and "emb-keys/.delta_erased" (int64, ascending: the keys written and
//    the keys erased since the parent), and for each tensor of rows by
//    those keys ("emb-values", its slots'): "emb-values/.delta_key_rows",
//    the rows of the ".delta_keys" keys in their order; a reader applies the
//    erasures, then the rows;
//  - ".varstate_chain" (string, [1 + links]): "varstate-delta-1", then one
//    "<file name>\t<crc32c of its .index, 8 hex digits>" per checkpoint the
//    delta applies to, the base first and its parent last. Links live in the
//    delta's directory; the checksums tie a delta to the exact files it was
//    saved on top of.
// Standard readers (TensorFlow's included) open a delta as an ordinary
// bundle; open_checkpoint() and Saver::restore() resolve the chain, so
// restoring any checkpoint of a chain reads the base and applies its deltas
// in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace varstate {

class FileSystem;

// What a delta holds for one tensor (the parts of a partitioned one summed).
struct DeltaEntry {
  std::string key;
  int64_t rows = -1;  // rows held; -1 when held whole
  int64_t bytes = 0;  // data bytes (ids included)
};

// One checkpoint of a chain.
struct ChainLink {
  std::string path;                 // the checkpoint prefix
  bool is_delta = false;            // false for the base
  std::vector<DeltaEntry> entries;  // a delta's tensors, by key
};

// The chain of `checkpoint`: its base first, `checkpoint` last (just
// `checkpoint` for a full one). Throws NotFoundError naming the file for a
// missing link, DataLossError naming the file for a link that is corrupt or
// not the one the delta was saved on, ValueError when nothing is at
// `checkpoint`.
std::vector<ChainLink> checkpoint_chain(const std::string& checkpoint, FileSystem* fs = nullptr);

// Writes the values `checkpoint` restores (for a delta: its chain applied)
// as one ordinary full V2 checkpoint at `output_prefix` (whole tensors,
// readable by TensorFlow), and copies the checkpoint's meta graph
// ("<checkpoint>.meta") next to it when there is one. Throws as
// checkpoint_chain and the file layer's errors; a failed compaction leaves
// no output.
void compact_checkpoint(const std::string& checkpoint, const std::string& output_prefix,
                        FileSystem* fs = nullptr);

}  // namespace varstate
