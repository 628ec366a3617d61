// A FileSystem that skips every sync: what SaverOptions::sync = false saves
// through.
//
// Everything is forwarded to the wrapped file system except
// WritableFile::sync() and FileSystem::sync_dir(), which return at once. The
// write order (temporary files, renames) is unchanged, so a save that
// completes is as consistent as before while the machine keeps running; only
// a crash or power loss can now lose or tear a checkpoint, as it can with
// TensorFlow's Saver, which never syncs. Internal.
#pragma once

#include <memory>

#include "checkpoint/file_system.h"

namespace varstate::internal {

// A view of `base` (which must outlive it) without syncs. Thread-safe as
// `base` is.
std::unique_ptr<FileSystem> unsynced_file_system(FileSystem& base);

}  // namespace varstate::internal
