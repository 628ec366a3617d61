// The pieces of DistributedSaver's incremental saves (distributed/
// distributed_saver.cc): taking the changed rows of the variables a task
// writes, where their marks live, reading those rows, and the chain's
// links as one string for broadcast. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_chain_internal.h"
#include "runtime/dirty_rows_internal.h"
#include "varstate/saver.h"
#include "varstate/tensor.h"

namespace varstate::internal {

// Turns on this process's row marks of every cluster-held variable among
// `items` (RemoteStorage::start_marking; local variables always mark).
void start_marking(const std::vector<Saver::Item>& items);

// The rows of each of `items` changed since the previous take, clearing
// the marks: a variable held by the cluster from its owner's storage (this
// task owns it), a local variable from its dirty rows (`generations[i]`
// is its last take's generation, updated here).
std::vector<DirtyRows::Taken> take_changed_rows(const std::vector<Saver::Item>& items,
                                                std::vector<uint64_t>& generations);

// Rows `rows` of the item's variable, on the host.
Tensor read_rows(const Saver::Item& item, const std::vector<int64_t>& rows);

// The links as one string ("<crc32c> <name>" each, length-prefixed), and back.
std::string encode_links(const std::vector<ChainRecordLink>& links);
std::vector<ChainRecordLink> decode_links(const std::string& encoded);

}  // namespace varstate::internal
