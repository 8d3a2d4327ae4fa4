/* cupti_subscribe.h — subscribing to CUPTI's callbacks under a name. CUPTI allows one callback subscriber per
 * process. cuptiSubscribe_v2 (CUPTI 13; optional, resolved with dlsym by each user) registers the subscriber under a
 * name, which CUPTI gives to a client refused later ("CUPTI for <name>": a profiler of the program can then say who
 * holds the slot and how to free it), and on a refusal writes the holder's name for us. Both of ktiming's
 * subscribers use this: the CUDA backend's reset watch (src/backends/cuda/cuda_reset_watch.c) and the CUPTI
 * injection library (tools/intercept/cupti). Header-only, with CUPTI's types mirrored (the layouts of
 * cupti_callbacks.h in CUDA 13), so neither needs CUPTI's headers of that version nor links libcupti. */
#ifndef KT_SHARED_CUPTI_SUBSCRIBE_H
#define KT_SHARED_CUPTI_SUBSCRIBE_H

#include <stdio.h>
#include <string.h>

/* CUpti_SubscriberParams. */
typedef struct kt__cupti_subscriber_params_t {
    size_t structSize;       /* of what the caller fills: CUPTI checks which fields it can read */
    const char *subscriberName;
    char *oldSubscriberName; /* on CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: the holder's name */
    size_t oldSubscriberSize;
} kt__cupti_subscriber_params_t;

/* CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN, and the longest name CUPTI keeps whole (CUPTI_SUBSCRIBER_NAME_MAX_LEN). */
#define KT__CUPTI_HOLDER_NAME_LEN 64
#define KT__CUPTI_NAME_MAX_LEN 53

/* The names ktiming subscribes under: what a refused profiler shows its user, so each says how to free the slot. */
#define KT__CUPTI_NAME_RUN "ktiming run (KTIMING_CUPTI_SUBSCRIBE=0 frees it)"
#define KT__CUPTI_NAME_WATCH "ktiming reset watch: kt_cuda_watch_resets(0) frees"
#ifdef __cplusplus /* tests/gpu/kt_gpu_checks.cu includes this too */
static_assert(sizeof KT__CUPTI_NAME_RUN <= KT__CUPTI_NAME_MAX_LEN, "CUPTI keeps the name whole");
static_assert(sizeof KT__CUPTI_NAME_WATCH <= KT__CUPTI_NAME_MAX_LEN, "CUPTI keeps the name whole");
#else
_Static_assert(sizeof KT__CUPTI_NAME_RUN <= KT__CUPTI_NAME_MAX_LEN, "CUPTI keeps the name whole");
_Static_assert(sizeof KT__CUPTI_NAME_WATCH <= KT__CUPTI_NAME_MAX_LEN, "CUPTI keeps the name whole");
#endif

/* The parameters for cuptiSubscribe_v2: our name, and `holder` (KT__CUPTI_HOLDER_NAME_LEN bytes) for the name of a
 * client that already holds the subscription. */
static inline kt__cupti_subscriber_params_t kt__cupti_subscriber_params(const char *name, char *holder)
{
    memset(holder, 0, KT__CUPTI_HOLDER_NAME_LEN);
    kt__cupti_subscriber_params_t p = {sizeof p, name, holder, KT__CUPTI_HOLDER_NAME_LEN};
    return p;
}

/* After a refusal: `out` says who holds the subscription, for a message ("held by \"CUPTI for Nsight Systems\"";
 * "" when CUPTI named nobody, or had no cuptiSubscribe_v2 to tell). */
static inline void kt__cupti_holder_text(char *holder, char *out, size_t size)
{
    holder[KT__CUPTI_HOLDER_NAME_LEN - 1] = '\0'; /* CUPTI may fill the buffer to its end */
    if (holder[0])
        snprintf(out, size, "held by \"%s\"", holder);
    else if (size)
        out[0] = '\0';
}

#endif
