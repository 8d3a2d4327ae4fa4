/* cupticrashprog.c — an unmodified CUDA program's view under `ktiming run`, against the CUPTI TEST DOUBLE: it loads
 * the CUPTI injection library as the CUDA driver does (dlopen of KT_TEST_CUPTI_INJECT, then InitializeInjection;
 * the library loads libktiming, so libktiming arrives late, as in a real CUDA program), waits until the library's
 * flusher thread has delivered CUPTI's completed records into the recorder (it asks libktiming for a snapshot
 * through the library's handle, up to 10 s), then dies as asked: segv (a write to an unmapped address) or kill
 * (SIGKILL to itself). Exit 3: the library did not load or initialise; 4: the records never arrived. */
#include <ktiming.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "die.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *path = getenv("KT_TEST_CUPTI_INJECT");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    int (*init)(void) = NULL;
    kt_snapshot_t *(*snapshot)(void) = NULL;
    const kt_kernel_timing_t *(*find)(const kt_snapshot_t *, const char *, kt_backend_t, const char *) = NULL;
    void (*release)(kt_snapshot_t *) = NULL;
    if (lib) { /* dlsym on the handle searches the library's dependencies too: libktiming */
        *(void **)&init = dlsym(lib, "InitializeInjection");
        *(void **)&snapshot = dlsym(lib, "kt_snapshot");
        *(void **)&find = dlsym(lib, "kt_snapshot_find");
        *(void **)&release = dlsym(lib, "kt_snapshot_free");
    }
    if (!init || !snapshot || !find || !release || init() != 1) {
        fprintf(stderr, "cupticrashprog: %s\n", lib ? "InitializeInjection failed" : dlerror());
        return 3;
    }
    int arrived = 0;
    for (int i = 0; i < 1000 && !arrived; i++) {
        kt_snapshot_t *s = snapshot();
        arrived = s && find(s, "kt_fake_configured", KT_BACKEND_CUDA, NULL) != NULL;
        release(s);
        if (!arrived)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (!arrived)
        return 4;
    ktt_die_as_asked(argv[1], argc);
    return 5;
}
