#include "runtime/variable_storage.h"

#include <typeindex>
#include <typeinfo>

namespace varstate::internal {

void for_each_kind(std::vector<StoragePart>& parts,
                   const std::function<void(std::vector<StoragePart>&)>& fn) {
  if (parts.empty()) return;
  auto kind = [](const StoragePart& p) { return std::type_index(typeid(*p.storage)); };
  const std::type_index first = kind(parts[0]);
  bool one_kind = true;
  for (const StoragePart& p : parts) one_kind = one_kind && kind(p) == first;
  if (one_kind) {
    fn(parts);  // the usual case: no regrouping
    return;
  }
  std::vector<bool> done(parts.size(), false);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (done[i]) continue;
    const std::type_index k = kind(parts[i]);
    std::vector<size_t> which;
    std::vector<StoragePart> group;
    for (size_t j = i; j < parts.size(); ++j) {
      if (done[j] || kind(parts[j]) != k) continue;
      done[j] = true;
      which.push_back(j);
      group.push_back(std::move(parts[j]));
    }
    fn(group);
    for (size_t g = 0; g < which.size(); ++g) parts[which[g]] = std::move(group[g]);
  }
}

}  // namespace varstate::internal
