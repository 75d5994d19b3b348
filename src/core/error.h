// The thread-local "last error" behind fusednorm_last_error(), and the one helper that sets it.
#pragma once

#include "fusednorm/fusednorm.h"

namespace fusednorm {

// Formats the message (printf-style), stores it for the calling thread, returns `status`.
fusednorm_status fail(fusednorm_status status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
void clear_error();
const char* last_error();

}  // namespace fusednorm
