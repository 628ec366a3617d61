// One task's share of a restore that several tasks make together
// (DistributedSaver::restore, which supplies the exchanges between them:
// this side needs no transport), in the steps that let every task agree
// before any variable changes: read (every check of
// Saver::restore, every tensor read into a fresh buffer, nothing assigned),
// verify (every checksum, with the other tasks' help), then assign.
//
// Each task reads only the slices of the variables it holds, straight from
// the stored pieces that overlap them, whatever partitioning and task count
// wrote the checkpoint (N tasks or parts restore into M): no task gathers
// the whole table, and no byte of a stored piece is read twice.
//
// Slices of whole rows (axis-0 partitioning, the usual case) are read
// straight into their buffers. A stored piece (one crc32c in the V2 format,
// over the whole piece) is often wanted by several tasks, each for its own
// rows; instead of every such task reading the whole piece to check that
// one crc32c, each reads only its rows and reports their crc32c. The rows
// of a piece no task wants are checksummed by the piece's verifier, the
// lowest rank reading it. Every task knows every task's ranges (all build
// the same variables, so all compute the same layout from the index), so
// after one exchange of the checksums each task joins each piece's range
// checksums in order (crc32c::combine) and compares the result with the
// stored crc32c: every task reaches the same verdict on every piece.
//
// Why this is sound: crc32c is affine over GF(2), so the joined checksum is
// exactly the crc32c of the concatenation of the bytes the tasks read; if
// it matches the stored one, every byte any task restores belongs to a
// piece whose stored checksum verified, the same guarantee as one process
// reading the piece whole. Where several tasks read the same bytes (a
// variable local to every process), their checksums must also be equal.
// The rows of a variable held in this task's MPI window (a ps task's
// share) are not read into a buffer at all where the file system maps
// files: they are checksummed in place in a read-only mapping of the data
// file (the page cache itself), and assign() copies them from there into
// the window, once, after the vote -- one copy per byte, as a variable
// local to the process gets (read into a fresh buffer that then becomes
// its value), instead of a copy into a buffer and another into the window.
// Checkpoint files are never rewritten in place, so the bytes copied are
// the bytes verified.
//
// Peak extra memory: the task's own variables' bytes (mapped pages of the
// page cache for window-held rows) plus an 8 MiB buffer for the verifier's
// gaps. Other layouts go through CheckpointReader (verified within the
// task).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/variable_storage.h"
#include "varstate/checkpoint_reader.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate {
class BundleReader;
class FileSystem;
class MappedRegion;
}  // namespace varstate

namespace varstate::internal {

class KeyedRestore;  // checkpoint/keyed_checkpoint.h

// A variable and the ranks restoring it: its owner, or every rank for a
// variable each process holds.
struct ShareItem {
  Saver::Item item;
  std::vector<int> ranks;
};

class RestoreShare {
 public:
  // `all` is every task's items (the same list, in the same order, on every
  // task); `rank` is this task, which reads its ranges on `threads` threads.
  RestoreShare(std::vector<ShareItem> all, int rank, std::string save_path, FileSystem* fs,
               int threads = 1);
  ~RestoreShare();

  // Reads this task's items into fresh buffers with every check but the
  // checksums of shared pieces, and returns those pieces' range checksums
  // in the layout's order. Throws what Saver::restore would (ValueError
  // for no checkpoint, NotFoundError for a missing key or shard,
  // DataLossError for a checksum of a piece read whole, InvalidArgumentError
  // for a dtype or shape); changes nothing.
  std::vector<uint32_t> read();

  // A shared piece that failed: the ranks to blame and the error.
  struct Failure {
    std::vector<int> ranks;
    std::string message;
  };
  // Joins every task's checksums (by rank, as read() returned them) into
  // each shared piece's; the first piece whose crc32c does not match (or
  // whose readers disagree). The same on every task.
  std::optional<Failure> verify(const std::vector<std::vector<uint32_t>>& by_rank) const;

  // Assigns the values read to this task's variables, each under its
  // update lock, and replaces its dynamic variables' tables.
  void assign();

 private:
  struct Piece;
  struct RowPlan;
  struct RangeRead;
  using PieceId = std::pair<std::string, int>;  // tensor name, stored slice

  std::optional<RowPlan> row_plan(const Saver::Item& item) const;
  void plan_layout();
  void queue_rows(const RowPlan& plan, Tensor& host, std::vector<RangeRead>& reads);
  bool queue_mapped_rows(const RowPlan& plan, std::vector<RowBytes>& runs,
                         std::vector<RangeRead>& reads);
  void queue_gaps(std::vector<RangeRead>& reads) const;
  void run_reads(std::vector<RangeRead>& reads);
  std::vector<uint32_t> my_checksums() const;

  std::vector<ShareItem> all_;
  int rank_;
  std::string save_path_;
  FileSystem* fs_;
  int threads_;
  static constexpr uint64_t kChunkBytes = uint64_t{16} << 20;
  std::unique_ptr<CheckpointReader> reader_;
  const BundleReader* bundle_ = nullptr;
  std::map<std::string, TensorInfo> infos_;  // the pieces' tensors
  std::map<PieceId, Piece> pieces_;
  // This task's checksum of each (piece, segment) it read.
  std::map<std::pair<PieceId, size_t>, uint32_t> mine_;
  std::vector<const Saver::Item*> my_items_;
  // This task's items of dynamic variables (stored whole, not in slices):
  // read and checked by read(), applied by assign().
  std::vector<Saver::Item> my_keyed_items_;
  std::unique_ptr<KeyedRestore> keyed_;
  std::vector<Tensor> values_;
  // Per item: the mapped runs of its rows, written by assign() instead of
  // values_ (empty when the value was read into values_).
  std::vector<std::vector<RowBytes>> mapped_runs_;
  std::vector<std::unique_ptr<MappedRegion>> mappings_;
};

}  // namespace varstate::internal
