#include "fish/fish.h"

extern "C" FISH_API const char* fish_version(void) { return "0.1.0"; }
