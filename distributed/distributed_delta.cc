#include "distributed/distributed_delta.h"

#include <mutex>

#include "runtime/gather_internal.h"
#include "runtime/remote_storage_internal.h"
#include "runtime/variable_internal.h"

namespace varstate::internal {

void start_marking(const std::vector<Saver::Item>& items) {
  for (const Saver::Item& item : items) {
    if (RemoteStorage* remote = remote_storage(item.variable)) remote->start_marking();
  }
}

std::vector<DirtyRows::Taken> take_changed_rows(const std::vector<Saver::Item>& items,
                                                std::vector<uint64_t>& generations) {
  generations.resize(items.size(), 0);
  std::vector<DirtyRows::Taken> taken;
  for (size_t i = 0; i < items.size(); ++i) {
    const Variable& v = items[i].variable;
    if (RemoteStorage* remote = remote_storage(v)) {
      DirtyRows::Taken t;
      t.all = false;
      t.rows = remote->take_marked_rows();
      taken.push_back(std::move(t));
      continue;
    }
    std::lock_guard lock(update_mutex(v));
    const TensorShape shape = v.shape();
    taken.push_back(dirty_rows(v).take(shape.rank() > 0 ? shape.dim(0) : 1, generations[i]));
    generations[i] = taken.back().generation;
  }
  return taken;
}

Tensor read_rows(const Saver::Item& item, const std::vector<int64_t>& rows) {
  if (RemoteStorage* remote = remote_storage(item.variable)) return remote->gather(rows);
  std::lock_guard lock(update_mutex(item.variable));
  return gather_rows(item.variable.ref(), rows).to_host();
}

std::string encode_links(const std::vector<ChainRecordLink>& links) {
  std::string out;
  for (const ChainRecordLink& l : links) {
    const std::string link = std::to_string(l.index_crc32c) + " " + l.name;
    out += std::to_string(link.size()) + ":" + link;
  }
  return out;
}

std::vector<ChainRecordLink> decode_links(const std::string& encoded) {
  std::vector<ChainRecordLink> out;
  size_t pos = 0;
  while (pos < encoded.size()) {
    const size_t colon = encoded.find(':', pos);
    const size_t n = std::stoul(encoded.substr(pos, colon - pos));
    const std::string link = encoded.substr(colon + 1, n);
    const size_t space = link.find(' ');
    out.push_back(
        {link.substr(space + 1), static_cast<uint32_t>(std::stoul(link.substr(0, space)))});
    pos = colon + 1 + n;
  }
  return out;
}

}  // namespace varstate::internal
