// libFuzzer target for the checkpoint readers (V2 index + data shard, V1
// table). Input layout: a little-endian uint16 n, then n bytes of index and
// the rest as the data shard; when n's top bit is set the rest is read as a
// V1 checkpoint instead. Every failure must be a varstate::Error -- never a
// crash, a sanitizer report or an unbounded allocation.
//
// Build with clang and -DVARSTATE_BUILD_FUZZERS=ON; run e.g.
//   build/test/bundle_fuzz -max_total_time=60 test/checkpoint/fuzz_corpus
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "varstate/checkpoint_reader.h"
#include "varstate/error.h"

namespace {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string templ =
        (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/bundle_fuzz_XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    return templ;
  }();
  return dir;
}

void write(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const unsigned header = data[0] | (unsigned{data[1]} << 8);
  data += 2;
  size -= 2;
  const std::string prefix = scratch_dir() + "/ckpt";
  unlink((prefix + ".index").c_str());
  unlink((prefix + ".data-00000-of-00001").c_str());
  unlink(prefix.c_str());
  if (header & 0x8000) {
    write(prefix, data, size);
  } else {
    size_t n = std::min<size_t>(header, size);
    write(prefix + ".index", data, n);
    write(prefix + ".data-00000-of-00001", data + n, size - n);
  }
  try {
    auto reader = varstate::open_checkpoint(prefix);
    for (const varstate::TensorInfo& info : reader->list()) {
      try {
        varstate::TensorData t = reader->read(info.name);
        if (!info.shape.empty() && info.shape[0] > 1) {
          std::vector<varstate::TensorSlice::Extent> extents(info.shape.size());
          extents[0] = {1, info.shape[0] - 1};
          reader->read_slice(info.name, varstate::TensorSlice(extents));
        }
      } catch (const varstate::Error&) {
      }
    }
  } catch (const varstate::Error&) {
  }
  return 0;
}
