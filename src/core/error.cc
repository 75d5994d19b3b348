#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

namespace fusednorm {
namespace {
thread_local char g_message[1024] = "";
}

fusednorm_status fail(fusednorm_status status, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(g_message, sizeof g_message, fmt, args);
  va_end(args);
  return status;
}

void clear_error() { g_message[0] = '\0'; }
const char* last_error() { return g_message; }

}  // namespace fusednorm
