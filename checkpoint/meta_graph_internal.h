// The form of export_meta_graph that takes a saver's items directly (used by
// Saver while it holds its own lock). Internal.
#pragma once

#include <vector>

#include "varstate/meta_graph.h"
#include "varstate/saver.h"

namespace varstate {

// export_meta_graph(options) with the SaveV2 node of a saver over `items`.
MetaGraphDef export_meta_graph_for_items(const ExportMetaGraphOptions& options,
                                         const std::vector<Saver::Item>& items);

}  // namespace varstate
