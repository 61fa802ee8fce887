// The model file as an upload source (model_file.h).
#include "model_file.h"

namespace mt {

mt_io* open_model_file_engine(const mt_backend_config& c, bool* direct, std::string* why) {
  mt_io_config ic;
  mt_io_config_default(&ic);
  ic.fail_after_bytes = c.fail_transfer_after_bytes;
  char err[256] = "";
  int status = MT_IO_OK;
  mt_io* io = mt_io_create(c.file_fd, &ic, &status, err, sizeof err);
  *direct = io != nullptr;
  if (io == nullptr && status == MT_IO_UNSUPPORTED) {
    ic.direct = 0;
    io = mt_io_create(c.file_fd, &ic, &status, err, sizeof err);
    mt_io_advise(io, MT_IO_ADVICE_RANDOM, 0, 0);  // a null engine is ignored
  }
  if (io == nullptr) *why = err;
  return io;
}

bool model_file_offset(const mt_backend_config& c, const void* src, uint64_t bytes, uint64_t* offset) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  if (c.file_base == nullptr || p < c.file_base) return false;
  const uint64_t at = uint64_t(p - c.file_base);
  if (at > c.file_length || bytes > c.file_length - at) return false;
  *offset = at;
  return true;
}

}  // namespace mt
