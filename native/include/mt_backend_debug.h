/*
 * The backend's debug-build verbs (MT_DEBUG_ASSERTS: include/mt_assert.h), for the tests that prove
 * the build's invariants are live; native/backend/backend_events.cc implements them.
 */
#ifndef MT_BACKEND_DEBUG_H
#define MT_BACKEND_DEBUG_H
#include "mt_assert.h"
#include "mt_backend.h"
#ifdef __cplusplus
extern "C" {
#endif

#if MT_DEBUG_ASSERTS_ENABLED
/* Completes an upload that already finished a second time, as a transfer thread with a bug would:
 * the completion's invariants (the slot was uploading, the event pending, uploads in flight above
 * 0) abort the process. MT_BACKEND_INVALID, with nothing done, unless event is a finished upload. */
int mt_backend_debug_recomplete(mt_backend* b, mt_event_id event);
#endif

#ifdef __cplusplus
}
#endif
#endif
