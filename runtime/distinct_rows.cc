#include "runtime/distinct_rows.h"

#include <algorithm>
#include <utility>

namespace varstate::internal {

DistinctRows distinct_rows(std::span<const int64_t> rows, bool positions) {
  DistinctRows d;
  // Sorted (row, position) pairs give the distinct rows, each position's
  // row and each row's first position in one pass.
  std::vector<std::pair<int64_t, int64_t>> order(rows.size());
  for (size_t p = 0; p < rows.size(); ++p) order[p] = {rows[p], static_cast<int64_t>(p)};
  std::sort(order.begin(), order.end());
  d.unique.reserve(rows.size());
  d.local.resize(rows.size());
  for (const auto& [row, p] : order) {
    if (d.unique.empty() || d.unique.back() != row) {
      d.unique.push_back(row);
      d.first.push_back(p);
    }
    d.local[static_cast<size_t>(p)] = static_cast<int64_t>(d.unique.size()) - 1;
  }
  if (!positions && d.unique.size() == rows.size()) {
    d.local.clear();
    d.first.clear();
  }
  return d;
}

}  // namespace varstate::internal
