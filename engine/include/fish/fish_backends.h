/* libfish public C API: compute-backend plugins (discovery report for
 * `fish devices`). Included by fish.h. */
#ifndef FISH_FISH_BACKENDS_H
#define FISH_FISH_BACKENDS_H
#ifdef __cplusplus
extern "C" {
#endif
/* (filled in by the plugin ABI work) */
#ifdef __cplusplus
}
#endif
#endif
