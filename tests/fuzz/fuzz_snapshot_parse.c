/* fuzz_snapshot_parse.c — libFuzzer entry point for the snapshot loader (see fuzz_check.h for the property). */
#include "support/fuzz_check.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kt_fuzz_check(data, size);
    return 0;
}
