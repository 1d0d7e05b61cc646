// fish_version, the error object, fish_free.
#include "capi/capi_util.h"

extern "C" {

FISH_API const char* fish_version(void) { return "0.1.0"; }

FISH_API const char* fish_error_message(const fish_error* e) { return e ? e->message.c_str() : ""; }

FISH_API void fish_error_free(fish_error* e) { delete e; }

FISH_API void fish_free(void* p) { std::free(p); }

}  // extern "C"
