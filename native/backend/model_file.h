// The model file as the source of a backend's uploads (the disk kind, and the cuda kinds given
// the file): each upload piece points into the file's mapping, and is read from the same range of
// the file instead, so the mapping's pages are never touched and the page cache keeps no copy.
//
//   open     the read engine: O_DIRECT first; where the filesystem refuses it (tmpfs: its pages
//            are the file anyway), buffered without readahead (reading one expert must not pull
//            its neighbours into the page cache)
//   offset   a piece's file offset (src - file_base), if the whole piece lies in the file
//   dropped  buffered only: the pages a read brought in are dropped after it (mt_io_advise)
#pragma once
#include <cstdint>
#include <string>
#include "mt_backend.h"
#include "mt_io.h"

namespace mt {

// The config names the model file (the cuda kinds' file mode: their uploads read it).
inline bool has_model_file(const mt_backend_config& c) {
  return c.file_fd >= 0 && c.file_base != nullptr && c.file_length > 0;
}

// The engine over config's file (file_fd), its fail_transfer_after_bytes as the engine's
// fail_after_bytes; *direct says which kind opened. nullptr with *why on failure.
mt_io* open_model_file_engine(const mt_backend_config& c, bool* direct, std::string* why);

// true, with the piece's offset in the file, when [src, src + bytes) lies in the mapped file.
bool model_file_offset(const mt_backend_config& c, const void* src, uint64_t bytes, uint64_t* offset);

}  // namespace mt
